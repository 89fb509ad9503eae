import Testing
@testable import OAuthCallback

@Suite struct FormEncodingTests {
    // application/x-www-form-urlencoded (WHATWG URL §5.2): only *-._ and alphanumerics stay,
    // space becomes +, everything else is %XX of its UTF-8 bytes.
    @Test(arguments: [
        ([("a b", "c&d=é*~")], "a+b=c%26d%3D%C3%A9*%7E"),
        ([("code", "4/0AX4Xf-W_h.z"), ("redirect_uri", "com.googleusercontent.apps.123-ios:/oauth2redirect")],
         "code=4%2F0AX4Xf-W_h.z&redirect_uri=com.googleusercontent.apps.123-ios%3A%2Foauth2redirect"),
        ([("k", "")], "k="),
        ([("+", "%")], "%2B=%25"),
    ])
    func fieldsAreEncodedAsTokenEndpointsExpect(fields: [(String, String)], expected: String) {
        #expect(FormEncoding.encode(fields) == expected)
    }
}
