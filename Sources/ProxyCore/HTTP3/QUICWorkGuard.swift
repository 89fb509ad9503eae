/// What a QUIC client makes a connection do without moving anything forward, counted against a
/// `GlitchBudget` (`http3.glitch_burst`, `http3.max_glitches_per_second`): the QUIC side of what
/// `HTTP2FrameGuard` does for HTTP/2. ngtcp2 bounds how much a client may send (flow control,
/// stream credit, anti-amplification) but not how many packets it may send that bring nothing:
/// PINGs, ACKs of nothing new, PADDING, duplicates, packets that fail to decrypt, streams reset
/// as soon as they open, connection IDs retired to have new ones made. Each costs a decryption,
/// ngtcp2's bookkeeping and often an ACK.
///
/// **A packet is free when it moved something forward**: request bytes delivered in order,
/// response bytes newly acknowledged, the handshake's data. Any other packet costs one unit.
/// Packets that carried data out of order (after a loss) cost their unit when they arrive and
/// earn it back when the gap fills: every `bytesPerUnit` bytes delivered or acknowledged give one
/// unit back, so a client pays for junk only with the data it moves, and a lossy but honest
/// upload or download never runs dry. Besides packets: each stream the client resets or stops
/// (RESET_STREAM, STOP_SENDING) costs one unit, and so does each connection ID made after the
/// handshake (a client that retires IDs as fast as it is given them).
///
/// A pure state machine: the connection calls `packetBegins`, the callbacks `progress` and
/// `charge`, then `packetEnds` says whether the budget ran out (the connection then ends with
/// H3_EXCESSIVE_LOAD).
struct QUICWorkGuard {
    enum Glitch: Int, CaseIterable {
        case emptyPacket, streamReset, connectionID

        var label: String {
            switch self {
            case .emptyPacket: return "empty_packet"
            case .streamReset: return "stream_reset"
            case .connectionID: return "connection_id"
            }
        }

        /// For the operator's log line.
        var text: String {
            switch self {
            case .emptyPacket: return "packets that carry nothing new"
            case .streamReset: return "streams reset or stopped by the client"
            case .connectionID: return "connection IDs retired for new ones"
            }
        }
    }

    /// About one full packet's worth of stream data.
    static let bytesPerUnit = 1200.0

    private var budget: GlitchBudget
    private var progressed = false
    /// The glitch that found the budget empty; the connection ends.
    private(set) var exhausted: Glitch?
    /// Units charged so far (for the connection's debug log line).
    private(set) var charged = 0

    init(limits: GlitchBudget.Limits, now: UInt64) {
        budget = GlitchBudget(limits: limits, now: now)
    }

    mutating func packetBegins() {
        progressed = false
    }

    /// The packet moved something forward: `bytes` of stream data delivered in order or newly
    /// acknowledged (0 for handshake data).
    mutating func progress(bytes: Int) {
        progressed = true
        if bytes > 0 { budget.give(Double(bytes) / Self.bytesPerUnit) }
    }

    /// ngtcp2 issued a connection ID (`get_new_connection_id`). Its first batch, when the
    /// handshake completes, is at most seven spares (NGTCP2_MAX_SCID_POOL_SIZE, eight, less the
    /// handshake's own ID) and free; every later one replaces an ID the client retired, and costs
    /// a unit.
    mutating func connectionIDIssued(now: UInt64) {
        idsIssued += 1
        if idsIssued > Self.freeConnectionIDs { charge(.connectionID, now: now) }
    }

    static let freeConnectionIDs = 7
    private var idsIssued = 0

    /// One unit for `glitch`; the first that finds the budget empty is kept in `exhausted`.
    mutating func charge(_ glitch: Glitch, now: UInt64) {
        charged += 1
        guard exhausted == nil, !budget.spend(now) else { return }
        exhausted = glitch
    }

    /// The packet was read: it costs a unit unless it made progress. The glitch that emptied the
    /// budget, if one did.
    mutating func packetEnds(now: UInt64) -> Glitch? {
        if !progressed { charge(.emptyPacket, now: now) }
        return exhausted
    }
}
