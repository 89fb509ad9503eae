import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import ProxyCore

/// Real sockets on the loopback: what the engine relies on the kernel to do.
@Suite struct SocketTests {
    /// The listener sets TCP_NODELAY once and accepted connections carry it: the accept loop no
    /// longer sets it per connection, so if a kernel stopped copying it, responses written in
    /// pieces would wait on Nagle's algorithm. This is the test that says so.
    @Test func anAcceptedConnectionInheritsNoDelayFromTheListener() throws {
        let listener = try Socket.makeListener(.ipv4(host: "127.0.0.1", port: 0), reusePort: true)
        defer { close(listener) }
        #expect(noDelay(listener) == 1)

        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &len) }
        }
        let port = UInt16(bigEndian: bound.sin_port)
        let client = try Socket.startConnect(.ipv4(host: "127.0.0.1", port: port))
        defer { close(client) }

        var peer = PeerAddress()
        var accepted: Int32?
        for _ in 0..<200 where accepted == nil {
            accepted = try Socket.accept(listener, peer: &peer)
            if accepted == nil { usleep(5_000) }
        }
        let fd = try #require(accepted, "the loopback connection never reached the listener")
        defer { close(fd) }
        #expect(noDelay(fd) == 1, "the accepted connection lost the listener's TCP_NODELAY")
    }

    private func noDelay(_ fd: Int32) -> Int32 {
        var value: Int32 = -1
        var len = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &len)
        return value
    }
}
