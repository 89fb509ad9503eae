#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import ProxyCore

/// `$NOTIFY_SOCKET` as systemd sets it: absent, a path, or an abstract name ('@'); anything else
/// is refused up front rather than sent nowhere. (The datagrams themselves are read from a real
/// socket in IntegrationTests/integration/test_service_manager.py.)
@Suite struct ServiceNotifierTests {
    @Test(arguments: [nil, ""] as [String?])
    func noSocketMeansNoNotifier(name: String?) throws {
        #expect(try ServiceNotifier(socket: name) == nil)
    }

    @Test(arguments: ["/run/systemd/notify", "@/org/freedesktop/systemd1/notify/123", "@" + String(repeating: "a", count: 107)])
    func pathsAndAbstractNamesAreTaken(name: String) throws {
        #expect(try ServiceNotifier(socket: name) != nil)
    }

    @Test(arguments: ["run/notify", "/" + String(repeating: "a", count: 107), "@" + String(repeating: "a", count: 108)])
    func relativeOrOverlongNamesAreRefused(name: String) {
        #expect(throws: SystemError.self) { try ServiceNotifier(socket: name) }
    }

    @Test func aSocketNobodyReadsIsAnError() throws {
        let notifier = try #require(try ServiceNotifier(socket: "@callback-proxy-test-nobody-\(getpid())"))
        #expect(throws: SystemError.self) { try notifier.ready() }
        notifier.close()
        notifier.close()
        try notifier.ready()   // closed: nothing to send, and no error
    }
}
