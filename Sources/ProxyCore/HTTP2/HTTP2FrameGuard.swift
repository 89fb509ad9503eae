/// Reads the frame headers a client sends, ahead of nghttp2, for two things nghttp2 1.52 does
/// not do in the way we run it. A pure state machine: bytes and the clock in, a verdict out.
///
/// **Streams the client has closed.** With `SETTINGS_NO_RFC7540_PRIORITIES` nghttp2 forgets a
/// stream the moment it closes, so it cannot tell a frame on a closed stream from one on a
/// stream it never saw, and lets both pass (DATA dropped, HEADERS ignored). RFC 9113 says:
/// DATA or HEADERS after the client ended its side (END_STREAM or RST_STREAM) is `STREAM_CLOSED`
/// (§5.1, §6.1); a HEADERS frame whose id is below one already used, on a stream never opened,
/// is `PROTOCOL_ERROR` (§5.1.1); a PRIORITY frame on stream 0 is `PROTOCOL_ERROR` (§6.3, and
/// nghttp2 skips PRIORITY frames unread with that setting). The guard keeps which streams the
/// client may still send on; frames for a stream *we* reset while the client could still send
/// are ignored, as §5.1 requires (they may have been in flight), for the last
/// `ignoredCapacity` such streams.
///
/// **Floods of frames that cost us and carry no request** (HAProxy's "glitches"): SETTINGS,
/// PING, PRIORITY, RST_STREAM, WINDOW_UPDATE, unknown frame types, and empty DATA, HEADERS or
/// CONTINUATION frames that end nothing. Each costs one unit of a per-connection budget that
/// refills at `perSecond` up to `burst`. WINDOW_UPDATEs are what a client owes for the data it
/// receives, and the most eager clients send two for every DATA frame (stream and connection:
/// Python's h2 acknowledging each chunk; Go sends them every 4 KiB), so every DATA frame sent
/// refills two units too (`GlitchBudget`). An empty budget is `ENHANCE_YOUR_CALM`.
struct HTTP2FrameGuard {
    typealias Limits = GlitchBudget.Limits

    enum Verdict: Equatable {
        case pass
        /// End the connection with `code` (an HTTP/2 error code). The frame that broke the rule
        /// began at `frameStart` in the bytes scanned (negative: in an earlier call).
        case connectionError(code: UInt32, frameStart: Int, reason: Reason)
    }

    enum Reason: String, Equatable {
        case flood = "frame flood"
        case closedStream = "frame on a closed stream"
        case reusedStreamID = "stream id below one already used"
        case priorityOnConnection = "PRIORITY on stream 0"
    }

    static let protocolError: UInt32 = 0x1
    static let streamClosed: UInt32 = 0x5
    static let enhanceYourCalm: UInt32 = 0xb
    static let windowUpdatesPerDataFrame = 2.0
    static let ignoredCapacity = 256
    static let closedCapacity = 64

    private enum FrameType: UInt8 {
        case data = 0, headers, priority, rstStream, settings, pushPromise, ping, goaway, windowUpdate, continuation
    }

    private static let endStream: UInt8 = 0x1
    private static let endHeaders: UInt8 = 0x4
    private static let prefaceLength = 24

    private var budget: GlitchBudget
    private var prefaceLeft = HTTP2FrameGuard.prefaceLength
    /// The frame header gathered so far: length, type and flags (5 bytes), then the stream id (4).
    private var head: UInt64 = 0
    private var streamID: UInt32 = 0
    private var headCount = 0
    private var payloadLeft = 0
    /// The highest stream id the client has opened.
    private var lastStream: Int32 = 0
    /// Streams the client may still send DATA or trailers on.
    private var clientOpen: Set<Int32> = []
    /// Streams we reset while the client could still send: what arrives for them is ignored.
    private var ignored: [Int32] = []
    private var ignoredNext = 0
    /// Streams the client ended recently: a HEADERS frame for one is STREAM_CLOSED, not a reused id.
    private var closed: [Int32] = []
    private var closedNext = 0

    init(limits: Limits, now: UInt64) {
        budget = GlitchBudget(limits: limits, now: now)
    }

    /// Scans `bytes`, the next bytes the client sent (the connection preface first).
    mutating func scan(_ bytes: UnsafeRawBufferPointer, now: UInt64) -> Verdict {
        var i = 0
        let n = bytes.count
        if prefaceLeft > 0 {
            let skip = min(prefaceLeft, n)
            prefaceLeft -= skip
            i = skip
        }
        while i < n {
            if payloadLeft > 0 {
                let skip = min(payloadLeft, n - i)
                payloadLeft -= skip
                i += skip
                continue
            }
            if headCount < 5 { head = head << 8 | UInt64(bytes[i]) } else { streamID = streamID << 8 | UInt32(bytes[i]) }
            headCount += 1
            i += 1
            guard headCount == 9 else { continue }
            let length = Int(head >> 16)
            let type = UInt8(truncatingIfNeeded: head >> 8)
            let flags = UInt8(truncatingIfNeeded: head)
            let stream = Int32(bitPattern: streamID & 0x7fff_ffff)
            head = 0
            streamID = 0
            headCount = 0
            payloadLeft = length
            if let reason = frame(type: type, flags: flags, stream: stream, length: length, now: now) {
                let code: UInt32
                switch reason {
                case .flood: code = Self.enhanceYourCalm
                case .closedStream: code = Self.streamClosed
                case .reusedStreamID, .priorityOnConnection: code = Self.protocolError
                }
                return .connectionError(code: code, frameStart: i - 9, reason: reason)
            }
        }
        return .pass
    }

    /// We sent `RST_STREAM` on `stream` (refused, cancelled, or a stream error nghttp2 found).
    mutating func sentReset(_ stream: Int32) {
        guard clientOpen.remove(stream) != nil else { return }
        if ignored.count < Self.ignoredCapacity {
            ignored.append(stream)
        } else {
            ignored[ignoredNext] = stream
            ignoredNext = (ignoredNext + 1) % Self.ignoredCapacity
        }
    }

    /// We sent a DATA frame: the WINDOW_UPDATEs the client owes for it are not a flood.
    mutating func sentDataFrame() {
        budget.give(Self.windowUpdatesPerDataFrame)
    }

    /// Whether the client may still send on `stream` (tests).
    func clientMaySend(_ stream: Int32) -> Bool { clientOpen.contains(stream) }

    // MARK: Rules

    private mutating func frame(type: UInt8, flags: UInt8, stream: Int32, length: Int, now: UInt64) -> Reason? {
        guard let known = FrameType(rawValue: type) else { return spend(now) ? nil : .flood }
        switch known {
        case .data:
            if let r = onStreamFrame(stream, ends: flags & Self.endStream != 0) { return r }
            if length == 0 && flags & Self.endStream == 0 { return spend(now) ? nil : .flood }
        case .headers:
            if let r = onHeaders(stream, ends: flags & Self.endStream != 0) { return r }
            if length == 0 && flags & (Self.endStream | Self.endHeaders) == 0 { return spend(now) ? nil : .flood }
        case .continuation:
            if length == 0 && flags & Self.endHeaders == 0 { return spend(now) ? nil : .flood }
        case .priority:
            if stream == 0 { return .priorityOnConnection }
            return spend(now) ? nil : .flood
        case .rstStream:
            if clientOpen.remove(stream) != nil { noteClosed(stream) }
            return spend(now) ? nil : .flood
        case .settings, .ping, .windowUpdate:
            return spend(now) ? nil : .flood
        case .pushPromise, .goaway:
            break  // nghttp2's: a client's PUSH_PROMISE is a connection error, GOAWAY ends it anyway
        }
        return nil
    }

    /// A HEADERS frame: a new stream, trailers, or an error.
    private mutating func onHeaders(_ stream: Int32, ends: Bool) -> Reason? {
        guard stream > 0, stream & 1 == 1 else { return nil }  // stream 0 or even: nghttp2's PROTOCOL_ERROR
        if stream > lastStream {
            lastStream = stream
            if ends { noteClosed(stream) } else { clientOpen.insert(stream) }
            return nil
        }
        return onStreamFrame(stream, ends: ends, isHeaders: true)
    }

    /// DATA, or HEADERS on a stream id already used.
    private mutating func onStreamFrame(_ stream: Int32, ends: Bool, isHeaders: Bool = false) -> Reason? {
        // Stream 0, or one not yet opened (idle): nghttp2 answers those with PROTOCOL_ERROR.
        guard stream > 0, stream <= lastStream, stream & 1 == 1 else { return nil }
        if clientOpen.contains(stream) {
            if ends {
                clientOpen.remove(stream)
                noteClosed(stream)
            }
            return nil
        }
        if ignored.contains(stream) { return nil }
        if isHeaders && !closed.contains(stream) { return .reusedStreamID }
        return .closedStream
    }

    private mutating func noteClosed(_ stream: Int32) {
        if closed.count < Self.closedCapacity {
            closed.append(stream)
        } else {
            closed[closedNext] = stream
            closedNext = (closedNext + 1) % Self.closedCapacity
        }
    }

    /// Takes one unit from the budget; false when it is empty.
    private mutating func spend(_ now: UInt64) -> Bool { budget.spend(now) }
}
