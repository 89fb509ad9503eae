#if canImport(Glibc)
import Glibc
#endif

/// The PROXY protocol header (HAProxy's specification, versions 1 and 2) that a layer-4 load
/// balancer (AWS NLB, HAProxy `send-proxy`, …) puts before the client's bytes, so the proxy
/// learns the client's address instead of the balancer's.
///
/// Parsing is incremental and never reads past the header: `nextRead` says how many bytes
/// may be consumed next, so what follows (an HTTP request, a TLS ClientHello) stays in the
/// socket for whoever comes after.
/// `package`: the fuzz targets (Sources/FuzzTargets) drive it too.
package struct ProxyHeaderReader {
    package enum Outcome {
        /// More bytes are needed; read at most `nextRead` of them.
        case incomplete
        /// A whole header: the client's address, or nil when the balancer speaks for itself
        /// (v1 `UNKNOWN`, v2 `LOCAL` — its own health checks — or a family other than TCP).
        case done(source: PeerAddress?)
        case invalid(String)
    }

    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    /// v1: at most 107 bytes including CRLF.
    static let v1Max = 107
    /// v2: 16 bytes, then the addresses and TLVs; more than this is refused.
    static let v2MaxPayload = 1_024

    package private(set) var bytes: [UInt8] = []

    package init() {}

    /// How many bytes the next read may take without going past the header. v1: up to the
    /// line's end (the caller peeks for the LF); v2: exactly what the length field says.
    package var nextRead: Int {
        guard let first = bytes.first else { return 1 }
        if first == 0x0D {
            if bytes.count < 16 { return 16 - bytes.count }
            return 16 + Int(bytes[14]) << 8 + Int(bytes[15]) - bytes.count
        }
        return Self.v1Max - bytes.count
    }

    /// Whether the bytes so far are a v1 header still waiting for its line end.
    package var isV1: Bool { bytes.first == UInt8(ascii: "P") }

    /// Takes bytes the caller read (never more than `nextRead`) and says where the header stands.
    package mutating func add(_ chunk: UnsafeRawBufferPointer) -> Outcome {
        bytes.append(contentsOf: chunk)
        guard let first = bytes.first else { return .incomplete }
        if first == 0x0D { return parseV2() }
        if first == UInt8(ascii: "P") { return parseV1() }
        return .invalid("no PROXY protocol header")
    }

    private func parseV2() -> Outcome {
        let prefix = min(bytes.count, 12)
        guard bytes[0..<prefix].elementsEqual(Self.v2Signature[0..<prefix]) else { return .invalid("bad v2 signature") }
        guard bytes.count >= 16 else { return .incomplete }
        guard bytes[12] >> 4 == 2 else { return .invalid("unsupported v2 version") }
        let length = Int(bytes[14]) << 8 + Int(bytes[15])
        guard length <= Self.v2MaxPayload else { return .invalid("v2 header of \(length) bytes") }
        guard bytes.count >= 16 + length else { return .incomplete }
        switch bytes[12] & 0x0F {
        case 0x0:
            return .done(source: nil)                       // LOCAL: the balancer's own connection
        case 0x1:
            break
        default:
            return .invalid("unsupported v2 command")
        }
        let payload = bytes[16..<(16 + length)]
        switch bytes[13] {
        case 0x11:                                          // TCP over IPv4
            guard length >= 12 else { return .invalid("v2 TCP4 addresses truncated") }
            return .done(source: Self.address(payload.prefix(4), family: AF_INET))
        case 0x21:                                          // TCP over IPv6
            guard length >= 36 else { return .invalid("v2 TCP6 addresses truncated") }
            return .done(source: Self.address(payload.prefix(16), family: AF_INET6))
        case 0x00, 0x12, 0x22, 0x31, 0x32:                  // UNSPEC, UDP, unix: nothing to use
            return .done(source: nil)
        default:
            return .invalid("unsupported v2 address family")
        }
    }

    private func parseV1() -> Outcome {
        let magic = Array("PROXY ".utf8)
        let prefix = min(bytes.count, magic.count)
        guard bytes[0..<prefix].elementsEqual(magic[0..<prefix]) else { return .invalid("no PROXY protocol header") }
        guard let lf = bytes.firstIndex(of: 0x0A) else {
            return bytes.count >= Self.v1Max ? .invalid("v1 line longer than 107 bytes") : .incomplete
        }
        guard lf == bytes.count - 1, lf > 0, bytes[lf - 1] == 0x0D else { return .invalid("v1 line not ended by CRLF") }
        // The spec's v1 line is printable US-ASCII; anything else (a NUL, a tab, a UTF-8
        // byte) is refused before any field is looked at.
        guard bytes[magic.count..<(lf - 1)].allSatisfy({ (0x20...0x7E).contains($0) }) else {
            return .invalid("v1 line holds a byte that is not printable ASCII")
        }
        let line = String(decoding: bytes[magic.count..<(lf - 1)], as: UTF8.self)
        let fields = line.split(separator: " ", omittingEmptySubsequences: false)
        if fields.first == "UNKNOWN" { return .done(source: nil) }
        guard fields.count == 5, fields[0] == "TCP4" || fields[0] == "TCP6",
              Self.isPort(fields[3]), Self.isPort(fields[4]),
              let source = PeerAddress(text: fields[1]), let destination = PeerAddress(text: fields[2]),
              source.isV4 == (fields[0] == "TCP4"), destination.isV4 == source.isV4 else {
            return .invalid("malformed v1 line")
        }
        // An IPv4-mapped IPv6 address is reported as IPv4 by PeerAddress: TCP6 with one is odd
        // but harmless, the check above only refuses a family that contradicts itself.
        return .done(source: source)
    }

    private static func isPort(_ s: Substring) -> Bool {
        guard (1...5).contains(s.count), s.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(s) else { return false }
        return n <= 65_535 && (s.count == 1 || s.first != "0")
    }

    private static func address(_ raw: ArraySlice<UInt8>, family: Int32) -> PeerAddress? {
        var text = [CChar](repeating: 0, count: 64)
        let ok = Array(raw).withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) != nil }
        return ok ? PeerAddress(text: text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }) : nil
    }
}

/// A connection on a `proxy_protocol` listener until its PROXY header has been read: then it
/// goes on as any accepted connection (a TLS handshake or HTTP), with the client's address.
final class ProxyProtocolAccept: Channel {
    let listener: ListenerContext
    let socketPeer: PeerAddress
    private var reader = ProxyHeaderReader()
    private var closed = false

    private init(fd: Int32, loop: EventLoop, listener: ListenerContext, peer: PeerAddress) {
        self.listener = listener
        socketPeer = peer
        super.init(fd: fd, loop: loop)
    }

    static func start(fd: Int32, loop: EventLoop, listener: ListenerContext, peer: PeerAddress) {
        // Only a trusted balancer may say who the client is (when any is configured).
        if !listener.config.trustedProxies.isEmpty && !listener.isTrusted(peer) {
            listener.log.debug("PROXY protocol connection from an untrusted address", ["peer": peer.text])
            Glibc.close(fd)
            return
        }
        let accept = ProxyProtocolAccept(fd: fd, loop: loop, listener: listener, peer: peer)
        do {
            try loop.register(accept, EventLoop.readable)
        } catch {
            Glibc.close(fd)
            return
        }
        accept.deadline = loop.now + listener.config.timeouts.clientHeader
        // The header usually arrives with the connection.
        accept.step()
    }

    override func onEvent(_ events: UInt32) { step() }

    private func step() {
        var scratch = [UInt8](repeating: 0, count: ProxyHeaderReader.v1Max)
        while !closed {
            var want = reader.nextRead
            if reader.isV1 || reader.bytes.isEmpty {
                // v1 ends at its LF: peek, and take only up to it.
                let peeked = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, min(want, $0.count), Int32(MSG_PEEK)) }
                if peeked == 0 { return close(nil) }
                if peeked < 0 { return errno == EAGAIN || errno == EINTR ? () : close(nil) }
                if reader.bytes.isEmpty && scratch[0] != UInt8(ascii: "P") {
                    want = scratch[0] == 0x0D ? min(16, peeked) : 1
                } else if let lf = scratch[0..<peeked].firstIndex(of: 0x0A) {
                    want = lf + 1
                } else {
                    want = peeked
                }
            }
            var chunk = [UInt8](repeating: 0, count: want)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, want, 0) }
            if n == 0 { return close(nil) }
            if n < 0 { return errno == EAGAIN || errno == EINTR ? () : close(nil) }
            switch chunk.withUnsafeBytes({ reader.add(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }) {
            case .incomplete:
                continue
            case .invalid(let reason):
                return close(reason)
            case .done(let source):
                return handOver(source ?? socketPeer)
            }
        }
    }

    override func onTimeout() { close("PROXY protocol header not complete in time") }

    override func onDrain() {
        if listener.isDraining(loop) { close(nil) }
    }

    /// The header is read: the connection starts over as an ordinary accepted one.
    private func handOver(_ peer: PeerAddress) {
        closed = true
        deadline = 0
        loop.unregister(self)
        listener.accepted(fd: fd, peer: peer, on: loop)
    }

    private func close(_ reason: String?) {
        guard !closed else { return }
        closed = true
        deadline = 0
        if let reason {
            listener.log.info("connection refused: bad PROXY protocol header", ["peer": socketPeer.text, "reason": reason])
        }
        loop.close(self)
    }
}
