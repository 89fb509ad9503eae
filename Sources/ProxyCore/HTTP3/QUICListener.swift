import CNgtcp2
import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// One loop's UDP socket for a TLS listener's HTTP/3 (`http3.enabled`): every loop binds the
/// listener's address with `SO_REUSEPORT`, and the kernel picks a socket by the datagram's
/// addresses. The socket is the loop's `Channel`; the QUIC connections on it are not (many
/// share one descriptor): each is a `LoopSource` this listener finds by connection ID.
///
/// A datagram goes, by its first packet's header (`QUICDatagramRoute`):
/// - to the connection that owns its destination ID here;
/// - to the loop its ID names, when another loop owns it (a client whose address changed now
///   reaches this socket), copied and handed over with `execute`, as the acceptor hands over a
///   descriptor; that loop answers from its own socket on the same address;
/// - to a new connection, if it is a client's first Initial (after a Retry if the policy asks);
/// - to a Version Negotiation reply, for a version ngtcp2 does not speak;
/// - to a stateless reset, for a short packet naming an ID of this process whose connection is gone
///   (closed, its closing period over); another process's IDs (a restart's, another instance's)
///   decrypt to nothing of ours and are dropped;
/// - else nowhere (counted).
final class QUICListener: Channel {
    /// Replaced on reload (on this loop's thread); new connections take the current one.
    var context: ListenerContext {
        didSet { ticketKey.use(context.config) }
    }
    /// The session-ticket key for the current configuration's limits.
    let ticketKey: QUICTicketKey
    /// This socket's own address: every path's local half.
    let local: QUICAddress
    let shared: QUICShared
    /// Every connection by each of its connection IDs (ours, and the client's first one until
    /// the handshake moves it to ours).
    var connections: [QUICConnectionKey: HTTP3Connection] = [:]
    /// Connections whose handshake is in progress (`QUICRetryPolicy`).
    var handshakes = 0
    /// Draining (shutdown): no new connections; live ones finish.
    var draining = false
    /// Where datagrams are received, reused (one loop, one thread): 64 KiB, what the kernel
    /// coalesces at most (UDP GRO).
    private var receiveBuffer = [UInt8](repeating: 0, count: 65_536)
    /// Where the listener's own replies are built (Retry, Version Negotiation, stateless reset):
    /// apart from `receiveBuffer`, which still holds the coalesced datagrams not yet read.
    private var replyBuffer = [UInt8](repeating: 0, count: 1500)
    /// Where this loop's connections build their packets, a batch at a time.
    static let sendBufferSize = 65_536
    /// The socket buffer each direction asks the kernel for; Linux grants at most
    /// `net.core.rmem_max` / `wmem_max`.
    static let socketBuffer = 4 << 20
    /// The receive buffer the kernel granted.
    let receiveBufferBytes: Int
    let sendBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: QUICListener.sendBufferSize)
    /// Whether the kernel segments UDP for us (GSO); off after the first refusal.
    private var segments = true
    /// Bound to a wildcard address (`0.0.0.0`, `::`): each datagram's own destination address is
    /// its path's local half, and replies leave from it (IP_PKTINFO), not from whichever address
    /// the routing table would pick (which a client would not recognise on a multi-address host).
    let wildcard: Bool

    init(fd: Int32, loop: EventLoop, context: ListenerContext, local: QUICAddress, shared: QUICShared) {
        self.context = context
        ticketKey = QUICTicketKey(secret: shared.ticketSecret, config: context.config)
        self.local = local
        self.shared = shared
        wildcard = local.isUnspecified
        // Destination addresses, ECN bits, GRO: each is used only where the kernel has it.
        let options = CProxyLinux_udp_options(fd, Int32(local.storage.ss_family))
        var granted: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &length)
        // Linux reports twice what it granted (the other half is for its own bookkeeping).
        receiveBufferBytes = Int(granted) / 2
        super.init(fd: fd, loop: loop)
        if receiveBufferBytes < Self.socketBuffer && loop.index == 0 {
            context.log.info("HTTP/3: the UDP receive buffer is smaller than asked; bursts may be dropped", [
                "listener": context.spec.name, "buffer": "\(receiveBufferBytes)", "asked": "\(Self.socketBuffer)",
                "setting": "net.core.rmem_max (sysctl), and net.core.wmem_max",
            ])
        }
        if wildcard && options & CProxyLinux_UDP_PKTINFO == 0 && loop.index == 0 {
            context.log.warn("HTTP/3: the kernel does not say which address a datagram was sent to; on this wildcard listener, replies leave from the address routing picks", [
                "listener": context.spec.name, "setting": "listen (bind HTTP/3's listener to the public address)",
            ])
        }
    }

    deinit { sendBuffer.deallocate() }

    /// A UDP socket on `address` for loop use (non-blocking, `SO_REUSEPORT`), and the address
    /// it is bound to.
    static func bind(_ address: SocketAddress) throws(SystemError) -> (Int32, QUICAddress) {
        let fd = try syscallValue("socket(udp)") {
            socket(address.family, CProxyLinux_SOCK_DGRAM | CProxyLinux_SOCK_NONBLOCK | CProxyLinux_SOCK_CLOEXEC, 0)
        }
        var ok = false
        defer { if !ok { close(fd) } }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        try syscallValue("setsockopt(SO_REUSEPORT)") { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size) }
        // Bursts of Initials and ACK-eliciting packets arrive faster than one batch reads them.
        var buffer = Int32(Self.socketBuffer)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, size)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, size)
        let bound = address.withSockAddr { Glibc.bind(fd, $0, $1) }
        if bound != 0 { throw SystemError(call: "bind(udp \(address))", errno: lastErrno()) }
        var local = QUICAddress()
        _ = withUnsafeMutablePointer(to: &local.storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &local.length) }
        }
        ok = true
        return (fd, local)
    }

    override func onEvent(_ events: UInt32) {
        // Bounded so one busy socket cannot starve the loop's TCP connections.
        for _ in 0..<64 {
            var arrival = QUICArrival(local: local)
            var to = sockaddr_storage()
            var segment: Int32 = 0
            var dropped: UInt32 = 0
            let n = receiveBuffer.withUnsafeMutableBytes { b in
                CProxyLinux_recv_datagrams(fd, b.baseAddress, b.count, &arrival.from.storage, &arrival.from.length, &to, &arrival.ecn,
                                           &segment, &dropped)
            }
            if n < 0 { return }  // EAGAIN: read out; anything else: the next event says
            if dropped != kernelDrops { kernelDropped(dropped) }
            if wildcard && to.ss_family != 0 { arrival.local.setAddress(to) }
            if arrival.ecn != 0 { context.engineMetrics.http3.ecnMarked(arrival.ecn) }
            // Several datagrams of one client coalesced by the kernel (GRO): `segment` bytes each,
            // the last maybe shorter; each is a datagram of its own to QUIC.
            let size = segment > 0 ? Int(segment) : n
            if size < n { context.engineMetrics.http3.coalesced.increment(by: (n + size - 1) / size) }
            receiveBuffer.withUnsafeBytes { b in
                var offset = 0
                while offset < n {
                    let end = min(offset + size, n)
                    received(UnsafeRawBufferPointer(rebasing: b[offset..<end]), arrival)
                    offset = end
                }
            }
        }
    }

    /// The kernel's running count of datagrams it dropped on this socket, its receive buffer
    /// full (SO_RXQ_OVFL), as last seen.
    private var kernelDrops: UInt32 = 0

    /// The kernel dropped datagrams since the last look (`count`: its running count): counted,
    /// and logged (at most once a second) with the settings that bound the buffer.
    private func kernelDropped(_ count: UInt32) {
        let new = Int(count &- kernelDrops)
        kernelDrops = count
        context.engineMetrics.http3.dropped(.receiveBufferFull, count: new)
        context.throttle.log(.warn, "HTTP/3: the kernel dropped datagrams, the socket's receive buffer full", key: "h3 rcvbuf", fields: [
            ("listener", context.spec.name), ("dropped", "\(new)"), ("buffer", "\(receiveBufferBytes)"),
            ("setting", "net.core.rmem_max (sysctl; the socket asks for \(Self.socketBuffer))"),
        ], on: loop)
    }

    /// One datagram, as it arrived.
    func received(_ datagram: UnsafeRawBufferPointer, _ arrival: QUICArrival) {
        context.engineMetrics.http3.datagramsReceived.increment()
        switch QUICDatagramRoute.of(datagram, ids: shared.ids(loop), loops: shared.loops.count) {
        case .drop:
            context.engineMetrics.http3.dropped(.malformed)
        case .loop(let other) where other != loop.index:
            hand(datagram, arrival, to: shared.loops[other])
        case .loop, .here:
            var header = ngtcp2_version_cid()
            let rv = ngtcp2_pkt_decode_version_cid(&header, datagram.baseAddress!.assumingMemoryBound(to: UInt8.self), datagram.count,
                                                   QUICConnectionIDs.length)
            if rv == NGTCP2_ERR_VERSION_NEGOTIATION {
                sendVersionNegotiation(header, to: arrival)
                return
            }
            guard rv == 0 else { return context.engineMetrics.http3.dropped(.malformed) }
            let dcidBytes = UnsafeRawBufferPointer(start: header.dcid, count: header.dcidlen)
            if let key = QUICConnectionKey(dcidBytes), let c = connections[key] {
                c.received(datagram, arrival)
                return
            }
            if datagram[0] & 0x80 == 0 {
                sendStatelessReset(dcid: Array(dcidBytes), answering: datagram.count, to: arrival)
                return
            }
            accept(datagram, arrival, version: header.version)
        }
    }

    /// A datagram for a connection another loop owns: it goes there, copied.
    private func hand(_ datagram: UnsafeRawBufferPointer, _ arrival: QUICArrival, to other: EventLoop) {
        let copy = Array(datagram)
        let context = self.context
        context.engineMetrics.http3.handedOver.increment()
        other.execute {
            guard let listener = context.newest(other).state(other).quic else { return }
            copy.withUnsafeBytes { listener.received($0, arrival) }
        }
    }

    // MARK: New connections

    /// A long-header packet for no connection here: a client's Initial opens one.
    private func accept(_ datagram: UnsafeRawBufferPointer, _ arrival: QUICArrival, version: UInt32) {
        let from = arrival.from
        let metrics = context.engineMetrics.http3
        var header = ngtcp2_pkt_hd()
        guard ngtcp2_accept(&header, datagram.baseAddress!.assumingMemoryBound(to: UInt8.self), datagram.count) == 0 else {
            return metrics.dropped(.notInitial)
        }
        guard !draining, !context.isDraining(loop) else {
            return metrics.dropped(.draining)
        }
        guard context.budget.hasRoom else {
            // The client's Initial goes unanswered; it tries again (its PTO) or falls back to TCP.
            context.throttle.log(.warn, "HTTP/3 connection refused: connection limit reached", key: "h3 budget", fields: [
                ("listener", context.spec.name), ("open", "\(context.budget.current)"), ("limit", "\(context.budget.limit)"),
                ("setting", "limits.max_connections (and the descriptor limit: LimitNOFILE, ulimit -n)"),
            ], on: loop)
            return metrics.dropped(.connectionLimit)
        }
        let token = header.token.base == nil ? [] : [UInt8](UnsafeBufferPointer(start: header.token.base, count: header.token.len))
        let client = from.socketAddress
        let dcid = QUICTokens.bytes(header.dcid)
        var originalDCID: [UInt8]? = nil
        var validated = false
        if !token.isEmpty, let client {
            if token[0] == UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
                guard let odcid = shared.tokens.validateRetryToken(token, client: client, dcid: dcid, version: version,
                                                                   now: QUICShared.wallClock()) else {
                    // RFC 9000 §8.1.2: an invalid Retry token ends the attempt (INVALID_TOKEN);
                    // dropping it is what ngtcp2's own server example does.
                    return metrics.dropped(.invalidToken)
                }
                originalDCID = odcid
                validated = true
            } else {
                validated = shared.tokens.validateRegularToken(token, client: client, now: QUICShared.wallClock())
            }
        }
        if originalDCID == nil, context.config.http3.retry.asksForRetry(handshakesInProgress: handshakes, addressValidated: validated) {
            sendRetry(header, version: version, to: arrival)
            return
        }
        // limits.max_connections_per_client counts QUIC connections with TCP ones, by address.
        var peer = from.peer
        guard context.clientMayConnect(&peer, on: loop) else {
            return metrics.dropped(.clientLimit)
        }
        guard let c = HTTP3Connection(listener: self, header: header, originalDCID: originalDCID, token: validated ? token : [],
                                      arrival: arrival, peer: peer) else {
            context.clientGone(peer)
            return metrics.dropped(.handshakeSetup)
        }
        c.received(datagram, arrival)
    }

    private func sendRetry(_ header: ngtcp2_pkt_hd, version: UInt32, to client: QUICArrival) {
        guard let address = client.from.socketAddress else { return }
        let scid = shared.ids(loop).make(loop: loop.index, random: QUICShared.random(13))
        guard let token = shared.tokens.retryToken(client: address, originalDCID: QUICTokens.bytes(header.dcid), retrySCID: scid,
                                                   version: version, now: QUICShared.wallClock()) else { return }
        var dcid = header.scid, odcid = header.dcid, s = QUICTokens.cid(scid)
        let n = replyBuffer.withUnsafeMutableBytes { b in
            token.withUnsafeBufferPointer { t in
                ngtcp2_crypto_write_retry(b.baseAddress!.assumingMemoryBound(to: UInt8.self), 1200, version, &dcid, &s, &odcid,
                                          t.baseAddress, t.count)
            }
        }
        guard n > 0 else { return }
        context.engineMetrics.http3.retriesSent.increment()
        send(count: n, to: client)
    }

    private func sendVersionNegotiation(_ header: ngtcp2_version_cid, to client: QUICArrival) {
        var versions: [UInt32] = [UInt32(NGTCP2_PROTO_VER_V1)]
        let unused = QUICShared.random(1)[0]
        let n = replyBuffer.withUnsafeMutableBytes { b in
            ngtcp2_pkt_write_version_negotiation(b.baseAddress!.assumingMemoryBound(to: UInt8.self), b.count, unused,
                                                 header.scid, header.scidlen, header.dcid, header.dcidlen, &versions, versions.count)
        }
        guard n > 0 else { return }
        context.engineMetrics.http3.dropped(.versionNegotiation)
        send(count: n, to: client)
    }

    /// RFC 9000 §10.3: a short packet for an ID of ours no loop knows gets a reset the client
    /// can verify, smaller than what it answers (so that two endpoints cannot loop), and only
    /// for packets long enough to be a real one (§10.3.3: 21 bytes at least, 41 to hide it).
    private func sendStatelessReset(dcid: [UInt8], answering size: Int, to client: QUICArrival) {
        let metrics = context.engineMetrics.http3
        guard dcid.count == QUICConnectionIDs.length, size > 41, dcid.withUnsafeBytes({ shared.ids(loop).loop(of: $0) }) != nil else {
            return metrics.dropped(.unknownConnection)
        }
        let token = shared.tokens.statelessResetToken(for: dcid)
        let randomLength = min(size - 1, 64) - Int(NGTCP2_STATELESS_RESET_TOKENLEN) - 1
        var random = QUICShared.random(randomLength)
        let n = replyBuffer.withUnsafeMutableBytes { b in
            ngtcp2_pkt_write_stateless_reset(b.baseAddress!.assumingMemoryBound(to: UInt8.self), b.count, token, &random, random.count)
        }
        guard n > 0 else { return }
        metrics.statelessResets.increment()
        send(count: n, to: client)
    }

    /// Sends the first `count` bytes of `replyBuffer` (a reply built there) to where `client`'s
    /// datagram came from, from the address it was sent to.
    private func send(count: Int, to client: QUICArrival) {
        var to = client.from, local = client.local
        let sent = replyBuffer.withUnsafeBytes { b in
            withUnsafePointer(to: &to.storage) { r in
                withUnsafePointer(to: &local.storage) { l in
                    r.withMemoryRebound(to: sockaddr.self, capacity: 1) { remote in
                        l.withMemoryRebound(to: sockaddr.self, capacity: 1) { from in
                            CProxyLinux_send_datagrams(fd, b.baseAddress, count, 0, remote, to.length, wildcard ? from : nil, 0)
                        }
                    }
                }
            }
        }
        if sent < 0 { context.engineMetrics.http3.dropped(.sendFailed) }
    }

    /// Sends `packets` packets built back to back (`HTTP3Connection.write`), each `segment`
    /// bytes but the last, from `local` (used on a wildcard socket) with the ECN bits `ecn`: one
    /// `sendmsg` with UDP GSO where the kernel takes it (one system call and one trip down the
    /// stack instead of one a packet), else one each. A full socket buffer drops them: QUIC's
    /// loss recovery sends them again, as it would after a loss on the way.
    func sendBatch(_ buffer: UnsafeRawPointer, count: Int, segment: Int, packets: Int, to remote: UnsafePointer<sockaddr>,
                   length: socklen_t, from local: UnsafePointer<sockaddr>, ecn: UInt8) {
        let source = wildcard ? local : nil
        if packets > 1 && segments {
            if CProxyLinux_send_datagrams(fd, buffer, count, UInt16(segment), remote, length, source, ecn) >= 0 { return }
            let e = lastErrno()
            guard e == EIO || e == EINVAL || e == ENOPROTOOPT || e == EOPNOTSUPP else {
                context.engineMetrics.http3.dropped(.sendFailed)
                return
            }
            segments = false
            context.log.info("HTTP/3: the kernel does not segment UDP (GSO) here; packets go one by one",
                             ["listener": context.spec.name, "errno": "\(e)"])
        }
        var offset = 0
        while offset < count {
            let n = min(segment, count - offset)
            if CProxyLinux_send_datagrams(fd, buffer + offset, n, 0, remote, length, source, ecn) < 0 {
                context.engineMetrics.http3.dropped(.sendFailed)
            }
            offset += n
        }
    }

    // MARK: Connection table

    func register(_ id: QUICConnectionKey, _ c: HTTP3Connection) { connections[id] = c }
    func unregister(_ id: QUICConnectionKey) { connections[id] = nil }

    /// Connections of a configuration a reload replaced go away (GOAWAY; their streams finish),
    /// as HTTP/2 connections do; the client's next connection gets the new one.
    override func onReload() {
        var seen = Set<ObjectIdentifier>()
        for c in connections.values where seen.insert(ObjectIdentifier(c)).inserted && c.listener.state(loop).retired {
            c.beginShutdown()
        }
    }

    override func onDrain() {
        guard context.isDraining(loop) else { return }
        draining = true
        var seen = Set<ObjectIdentifier>()
        for c in connections.values where seen.insert(ObjectIdentifier(c)).inserted { c.beginShutdown() }
    }
}

/// A socket address as the kernel gives it (`recvfrom`, `getsockname`), kept as is: QUIC paths
/// compare and hand these to ngtcp2 without formatting them.
struct QUICAddress: Equatable, @unchecked Sendable {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)

    static func == (a: QUICAddress, b: QUICAddress) -> Bool {
        guard a.length == b.length else { return false }
        return withUnsafeBytes(of: a.storage) { x in withUnsafeBytes(of: b.storage) { y in memcmp(x.baseAddress!, y.baseAddress!, Int(a.length)) == 0 } }
    }

    /// The address as the rest of the engine names it (tokens are bound to it).
    var socketAddress: SocketAddress? {
        withUnsafeBytes(of: storage) { raw -> SocketAddress? in
            let family = Int32(raw.load(as: sa_family_t.self))
            var text = [CChar](repeating: 0, count: 64)
            if family == AF_INET {
                var sin = raw.load(as: sockaddr_in.self)
                guard inet_ntop(AF_INET, &sin.sin_addr, &text, 64) != nil else { return nil }
                return .ipv4(host: Self.text(text), port: UInt16(bigEndian: sin.sin_port))
            }
            if family == AF_INET6 {
                var sin6 = raw.load(as: sockaddr_in6.self)
                guard inet_ntop(AF_INET6, &sin6.sin6_addr, &text, 64) != nil else { return nil }
                return .ipv6(host: Self.text(text), port: UInt16(bigEndian: sin6.sin6_port))
            }
            return nil
        }
    }

    private static func text(_ c: [CChar]) -> String {
        String(decoding: c.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    var peer: PeerAddress { withUnsafeBytes(of: storage) { PeerAddress(storage: $0.baseAddress!) } }

    /// `0.0.0.0` or `::`: a wildcard socket's address.
    var isUnspecified: Bool {
        withUnsafeBytes(of: storage) { raw in
            switch Int32(raw.load(as: sa_family_t.self)) {
            case AF_INET: return raw.load(as: sockaddr_in.self).sin_addr.s_addr == 0
            case AF_INET6: return raw.load(fromByteOffset: 8, as: (UInt64, UInt64).self) == (0, 0)
            default: return false
            }
        }
    }

    /// This address with `address`'s IP (a datagram's destination: the kernel names no port),
    /// the port kept.
    mutating func setAddress(_ address: sockaddr_storage) {
        withUnsafeMutableBytes(of: &storage) { raw in
            withUnsafeBytes(of: address) { source in
                let family = Int32(source.load(as: sa_family_t.self))
                let port = raw.load(fromByteOffset: 2, as: UInt16.self)
                if family == AF_INET {
                    raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<MemoryLayout<sockaddr_in>.size]))
                    length = socklen_t(MemoryLayout<sockaddr_in>.size)
                } else if family == AF_INET6 {
                    raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<MemoryLayout<sockaddr_in6>.size]))
                    length = socklen_t(MemoryLayout<sockaddr_in6>.size)
                }
                raw.storeBytes(of: port, toByteOffset: 2, as: UInt16.self)
            }
        }
    }
}

/// How a datagram arrived: from which client address, to which of our addresses (the listener's
/// own, or on a wildcard socket the one the client reached), with which ECN bits.
struct QUICArrival: @unchecked Sendable {
    var from = QUICAddress()
    var local: QUICAddress
    var ecn: UInt8 = 0
}
