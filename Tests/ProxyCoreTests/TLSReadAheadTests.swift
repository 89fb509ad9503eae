import COpenSSL
import CProxyLinux
import Foundation
import Testing
@testable import ProxyCore

/// A TLS listener's session reads ahead (`TLSServerContext.makeSession`): one socket read may
/// bring several records, and `Transport` must take every whole one out before the connection
/// goes back to epoll — but read the socket only once a call. A real server session from the
/// production context, on one end of a socket pair; the client is an OpenSSL session on memory
/// BIOs, so the test decides which of its ciphertext bytes reach the socket, and when.
@Suite struct TLSReadAheadTests {
    @Test func wholeRecordsComeOutTogetherAndAPartialOneWaitsForTheSocket() throws {
        let pair = try TLSPair()
        defer { pair.close() }
        let a = [UInt8](repeating: 0x61, count: 100), b = [UInt8](repeating: 0x62, count: 200)
        let c = [UInt8](repeating: 0x63, count: 300)
        let (ra, rb, rc) = (pair.seal(a), pair.seal(b), pair.seal(c))

        // A whole record and half of the next: the read returns the whole one only.
        pair.send(ra + rb.prefix(rb.count / 2))
        var buffer = ByteBuffer(capacity: 16 * 1024)
        #expect(try pair.read(into: &buffer) == .done(100))
        #expect(Array(buffer.readableBytes) == a)
        buffer.clear()

        // The rest of that record and a third are in the kernel now, the start of the second in
        // OpenSSL: what OpenSSL holds is not a whole record, and it is not to read the socket.
        pair.send(Array(rb.dropFirst(rb.count / 2)) + rc)
        #expect(pair.session.hasPending)
        #expect(try pair.session.readBuffered(into: buffer.writePointer, count: buffer.writable) == .wouldBlock)

        // The next read reads the socket once: OpenSSL completes a started record with exactly
        // its missing bytes, so the third record stays in the kernel, where epoll sees it.
        #expect(try pair.read(into: &buffer) == .done(200))
        #expect(Array(buffer.readableBytes) == b)
        #expect(!pair.session.hasPending)
        #expect(pair.serverReadable)
        buffer.clear()
        #expect(try pair.read(into: &buffer) == .done(300))
        #expect(Array(buffer.readableBytes) == c)
        #expect(!pair.session.hasPending && !pair.serverReadable)
        buffer.free()
    }

    @Test func recordsThatArriveInOneSegmentAllComeOutOfOneRead() throws {
        let pair = try TLSPair()
        defer { pair.close() }
        let pieces = (0..<20).map { [UInt8](repeating: UInt8(0x41 + $0), count: 50 + $0) }
        pair.send(pieces.flatMap { pair.seal($0) })
        var buffer = ByteBuffer(capacity: 16 * 1024)
        let total = pieces.reduce(0) { $0 + $1.count }
        #expect(try pair.read(into: &buffer) == .done(total))
        #expect(Array(buffer.readableBytes) == pieces.flatMap { $0 })
        #expect(!pair.session.hasPending && !pair.serverReadable)
        buffer.free()
    }
}

/// A server `TLSSession` on a non-blocking socket and an OpenSSL client on memory BIOs, with
/// the handshake done.
private final class TLSPair {
    let server: Int32, client: Int32
    let session: TLSSession
    let context: TLSServerContext
    private let clientContext: OpaquePointer
    private let tls: OpaquePointer
    private let clientIn: OpaquePointer, clientOut: OpaquePointer
    private let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "tls-read-ahead-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try TLSPair.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                             "-keyout", "\(directory)/key.pem", "-out", "\(directory)/cert.pem", "-days", "2",
                             "-subj", "/CN=read-ahead.test"])
        context = try TLSServerContext.load(TLSServerSettings(certFile: "\(directory)/cert.pem", keyFile: "\(directory)/key.pem"))
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw TLSPairError("socketpair") }
        (server, client) = (fds[0], fds[1])
        _ = fcntl(server, F_SETFL, fcntl(server, F_GETFL) | O_NONBLOCK)
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        session = try #require(context.makeSession(fd: server))
        clientContext = try #require(SSL_CTX_new(TLS_client_method()))
        tls = try #require(SSL_new(clientContext))
        clientIn = try #require(BIO_new(BIO_s_mem()))
        clientOut = try #require(BIO_new(BIO_s_mem()))
        SSL_set_bio(tls, clientIn, clientOut)
        SSL_set_connect_state(tls)
        // Both sides step until both are done; the client's bytes cross the socket pair.
        for _ in 0..<100 {
            let clientDone = SSL_do_handshake(tls) == 1
            pump()
            let serverStep = session.handshake()
            pump()
            if clientDone, case .done = serverStep { return }
            if case .failed(let failure) = serverStep { throw TLSPairError("handshake: \(failure.reason)") }
        }
        throw TLSPairError("the handshake did not finish")
    }

    /// The records of one client write, as ciphertext (not sent).
    func seal(_ bytes: [UInt8]) -> [UInt8] {
        _ = bytes.withUnsafeBytes { SSL_write(tls, $0.baseAddress, Int32($0.count)) }
        return drainClientOutput()
    }

    /// Bytes from the client to the server's socket.
    func send(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var at = 0
            while at < raw.count {
                let n = write(client, raw.baseAddress! + at, raw.count - at)
                precondition(n > 0, "the socket pair is full")
                at += n
            }
        }
    }

    /// What epoll would report: bytes wait in the server's socket.
    var serverReadable: Bool {
        var p = pollfd(fd: server, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    /// One read as a connection makes it (the bytes then counted into `buffer`, as callers do).
    func read(into buffer: inout ByteBuffer) throws -> IOResult {
        let r = try Transport(fd: server, tls: session).read(into: &buffer, reserve: 1024)
        if case .done(let n) = r { buffer.writer += n }
        return r
    }

    /// The client's handshake bytes to the server, the server's to the client.
    private func pump() {
        send(drainClientOutput())
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(client, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            _ = chunk.withUnsafeBytes { BIO_write(clientIn, $0.baseAddress, Int32(n)) }
        }
    }

    private func drainClientOutput() -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { BIO_read(clientOut, $0.baseAddress, Int32($0.count)) }
            guard n > 0 else { return out }
            out += chunk.prefix(Int(n))
        }
    }

    func close() {
        SSL_free(tls)
        SSL_CTX_free(clientContext)
        Glibc.close(server)
        Glibc.close(client)
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TLSPairError("openssl exited with \(process.terminationStatus)") }
    }
}

private struct TLSPairError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
