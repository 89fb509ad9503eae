import Testing
@testable import ProxyCore

@Suite struct HeaderKindTests {
    static func kind(_ name: String) -> HeaderKind {
        let bytes = Array(name.utf8)
        return bytes.withUnsafeBytes { HeaderKind.of($0, ByteRange(start: 0, count: bytes.count)) }
    }

    static func hasUnderscore(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        return bytes.withUnsafeBytes { ByteMatching.contains($0, ByteRange(start: 0, count: bytes.count), 0x5F) }
    }

    @Test(arguments: ["X-Forwarded-For", "x-forwarded-for", "X_Forwarded_For", "X_FORWARDED_FOR", "x-forwarded_for"])
    func forwardedForInEverySpelling(_ name: String) {
        #expect(Self.kind(name) == .xForwardedFor)
    }

    @Test func theOtherForwardingFieldsInEverySpelling() {
        for name in ["X_Forwarded_Host", "x-forwarded-host"] { #expect(Self.kind(name) == .xForwardedHost) }
        for name in ["X_FORWARDED_PROTO", "X-Forwarded-Proto"] { #expect(Self.kind(name) == .xForwardedProto) }
        for name in ["X_Request_Id", "x-request-id"] { #expect(Self.kind(name) == .xRequestID) }
        for name in ["Forwarded", "X-Real-IP", "x_real_ip", "X-Forwarded-Port", "X_Forwarded_Ssl", "x-forwarded-scheme",
                     "X-Forwarded-Prefix"] {
            #expect(Self.kind(name) == .forwarding, "\(name)")
            #expect(Self.kind(name).isForwarding)
        }
        #expect(!Self.kind("X-Forwarded-Email").isForwarding)
        // `_` only stands for `-`, not for any byte.
        #expect(Self.kind("X.Forwarded.For") == .other)
        #expect(Self.kind("Content_Length") == .other)
    }

    @Test(arguments: [("Accept", false), ("X_A", true), ("Some-Long-Header_", true), ("_", true),
                      ("abcdefgh_", true), ("abcdefghijklmnop", false), ("abcdefg_ijklmnop", true)])
    func underscoresAreFoundAnywhereInTheName(_ c: (String, Bool)) {
        #expect(Self.hasUnderscore(c.0) == c.1)
    }

    @Test(arguments: ["X-Sendfile-Type", "x-sendfile-type", "X_Sendfile_Type", "X-Accel-Mapping", "X_ACCEL_MAPPING",
                      "x-accel_mapping", "X-Accel-Redirect", "x-accel-buffering", "X-Accel-Limit-Rate", "X-Accel-Expires",
                      "X-Accel-Charset"])
    func theFieldsThatSteerRackSendfileAreKnownInEverySpelling(name: String) {
        #expect(Self.kind(name) == .sendfileControl)
    }

    @Test func theirNeighboursAreNotAndNoHeaderRuleMayNameThem() {
        #expect(Self.kind("X-Sendfile-Typo") == .other)
        #expect(Self.kind("X-Accel-Redirects") == .other)
        #expect(Self.kind("X-Accel-Anything") == .other)
        #expect(Self.kind("X-Forwarded-Ssl") == .forwarding)
        for name in ["X-Sendfile-Type", "x_accel_mapping"] { #expect(HeaderRules.isProtected(name, request: true)) }
    }
}
