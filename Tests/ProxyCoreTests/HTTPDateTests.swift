import Testing
@testable import ProxyCore

@Suite struct HTTPDateTests {
    @Test(arguments: [
        (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),   // RFC 9110's own example
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (1_709_164_800, "Thu, 29 Feb 2024 00:00:00 GMT"),
    ])
    func imfFixdate(seconds: Int, expected: String) {
        #expect(String(decoding: HTTPDateCache.format(epochSeconds: seconds), as: UTF8.self) == expected)
    }
}
