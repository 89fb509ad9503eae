#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import ProxyCore

/// The lingering close's reads (real sockets, no event loop) and its clock.
@Suite struct LingeringCloseTests {
    /// A connected TCP pair on loopback: (accepted side, client side).
    func tcpPair() -> (Int32, Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")  // port 0: any free one
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 1) == 0
                && getsockname(listener, $0, &length) == 0 }
        }
        #expect(bound)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) }
        }
        #expect(connected == 0)
        let accepted = accept(listener, nil, nil)
        #expect(accepted >= 0)
        return (accepted, client)
    }

    func unixPair() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    func send(_ fd: Int32, _ count: Int) {
        let bytes = [UInt8](repeating: 0x75, count: count)
        var sent = 0
        while sent < count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL)) }
            #expect(n > 0)
            if n <= 0 { return }
            sent += n
        }
    }

    /// Waits until `fd` has input (the peer's bytes crossed loopback).
    func readable(_ fd: Int32) {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, 2000)
    }

    @Test(arguments: ["tcp", "unix"])
    func dropsWhatArrivedThenReportsTheClose(kind: String) {
        let (ours, theirs) = kind == "tcp" ? tcpPair() : unixPair()
        defer { close(ours) }
        #expect(Socket.discardInput(ours) == .nothing)
        send(theirs, 100_000)
        readable(ours)
        #expect(Socket.discardInput(ours) == .some)
        // Dropped, not left: nothing more to read until the peer sends again.
        var byte: UInt8 = 0
        #expect(recv(ours, &byte, 1, Int32(MSG_DONTWAIT)) == -1)
        close(theirs)
        readable(ours)
        #expect(Socket.discardInput(ours) == .closed)
    }

    @Test func eachReadWithBytesGivesAnotherQuietSecondUpToTenInAll() {
        let (ours, theirs) = tcpPair()
        defer { close(ours); close(theirs) }
        let second = Timeouts.second
        var linger = LingeringClose()
        let first = linger.begin(now: 100 * second)
        #expect(first == 101 * second)
        // Nothing arrived: the deadline stays.
        #expect(linger.discard(ours, now: 100 * second + 500, deadline: first) == first)
        send(theirs, 1000)
        readable(ours)
        #expect(linger.discard(ours, now: 105 * second, deadline: first) == 106 * second)
        send(theirs, 1000)
        readable(ours)
        #expect(linger.discard(ours, now: 109 * second + second / 2, deadline: 110 * second) == 110 * second)
    }
}
