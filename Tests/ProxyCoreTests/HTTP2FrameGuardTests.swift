import Testing
@testable import ProxyCore

/// `HTTP2FrameGuard` on frame bytes alone: what a client may send on streams it closed, and
/// how much of what carries no request it may send.
@Suite struct HTTP2FrameGuardTests {
    static let second: UInt64 = 1_000_000_000
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    enum T: UInt8 { case data = 0, headers, priority, rst, settings, pushPromise, ping, goaway, windowUpdate, continuation }
    static let endStream: UInt8 = 0x1
    static let endHeaders: UInt8 = 0x4

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, payload: Int = 0) -> [UInt8] {
        [UInt8(payload >> 16 & 0xff), UInt8(payload >> 8 & 0xff), UInt8(payload & 0xff), type, flags,
         UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)]
            + [UInt8](repeating: 0x2a, count: payload)
    }

    static func frame(_ type: T, flags: UInt8 = 0, stream: UInt32 = 0, payload: Int = 0) -> [UInt8] {
        frame(type.rawValue, flags: flags, stream: stream, payload: payload)
    }

    /// A request's HEADERS (a few bytes of header block; the guard never decodes it).
    static func headers(_ stream: UInt32, ends: Bool = true) -> [UInt8] {
        frame(.headers, flags: endHeaders | (ends ? endStream : 0), stream: stream, payload: 12)
    }

    struct Client {
        var guardian = HTTP2FrameGuard(limits: .init(burst: 10, perSecond: 5), now: 0)
        var now: UInt64 = 0

        init(burst: Int = 10, perSecond: Int = 5) {
            guardian = HTTP2FrameGuard(limits: .init(burst: burst, perSecond: perSecond), now: 0)
            #expect(send(HTTP2FrameGuardTests.preface + HTTP2FrameGuardTests.frame(.settings, payload: 6)) == .pass)
        }

        @discardableResult
        mutating func send(_ bytes: [UInt8]) -> HTTP2FrameGuard.Verdict {
            bytes.withUnsafeBytes { guardian.scan($0, now: now) }
        }

        mutating func reason(_ bytes: [UInt8]) -> HTTP2FrameGuard.Reason? {
            if case .connectionError(_, _, let r) = send(bytes) { return r }
            return nil
        }
    }

    // MARK: Streams

    @Test func dataAfterTheClientEndedItsStreamIsStreamClosed() {
        var c = Client()
        #expect(c.send(Self.headers(1)) == .pass)
        #expect(c.send(Self.frame(.data, flags: Self.endStream, stream: 1, payload: 4)) ==
                .connectionError(code: HTTP2FrameGuard.streamClosed, frameStart: 0, reason: .closedStream))
    }

    @Test func dataAfterTheClientResetItsStreamIsStreamClosed() {
        var c = Client()
        c.send(Self.headers(1, ends: false))
        #expect(c.send(Self.frame(.rst, stream: 1, payload: 4)) == .pass)
        #expect(c.reason(Self.frame(.data, stream: 1, payload: 4)) == .closedStream)
    }

    @Test func headersOnAStreamTheClientEndedIsStreamClosed() {
        var c = Client()
        c.send(Self.headers(1))
        let verdict = c.send(Self.headers(1))
        #expect(verdict == .connectionError(code: HTTP2FrameGuard.streamClosed, frameStart: 0, reason: .closedStream))
    }

    @Test func aStreamIDBelowOneAlreadyUsedIsAProtocolError() {
        var c = Client()
        let bytes = Self.headers(5) + Self.headers(3)
        #expect(c.send(bytes) == .connectionError(code: HTTP2FrameGuard.protocolError, frameStart: Self.headers(5).count,
                                                  reason: .reusedStreamID))
    }

    @Test func priorityOnStreamZeroIsAProtocolErrorAndOnAStreamItIsNot() {
        var c = Client()
        #expect(c.send(Self.frame(.priority, stream: 3, payload: 5)) == .pass)
        #expect(c.send(Self.frame(.priority, stream: 0, payload: 5)) ==
                .connectionError(code: HTTP2FrameGuard.protocolError, frameStart: 0, reason: .priorityOnConnection))
    }

    @Test func bodyAndTrailersOnAnOpenStreamPass() {
        var c = Client()
        #expect(c.send(Self.headers(1, ends: false)) == .pass)
        #expect(c.guardian.clientMaySend(1))
        #expect(c.send(Self.frame(.data, stream: 1, payload: 100) + Self.frame(.data, stream: 1, payload: 100)) == .pass)
        #expect(c.send(Self.headers(1, ends: true)) == .pass)  // trailers end it
        #expect(!c.guardian.clientMaySend(1))
        #expect(c.reason(Self.frame(.data, stream: 1, payload: 1)) == .closedStream)
    }

    @Test func whatArrivesForAStreamWeResetIsIgnoredNotAnError() {
        // RFC 9113 §5.1: frames may already be in flight when our RST_STREAM leaves.
        var c = Client()
        c.send(Self.headers(1, ends: false))
        c.guardian.sentReset(1)
        #expect(c.send(Self.frame(.data, stream: 1, payload: 10)) == .pass)
        #expect(c.send(Self.frame(.data, flags: Self.endStream, stream: 1, payload: 10)) == .pass)
        #expect(c.send(Self.headers(1)) == .pass)
    }

    @Test func aResetAfterTheClientEndedItsSideDoesNotExcuseLaterFrames() {
        var c = Client()
        c.send(Self.headers(1))  // END_STREAM: the client is done with stream 1
        c.guardian.sentReset(1)
        #expect(c.reason(Self.frame(.data, stream: 1, payload: 1)) == .closedStream)
    }

    @Test func idleStreamsAndStreamZeroAreLeftToNghttp2() {
        var c = Client()
        #expect(c.send(Self.frame(.data, stream: 7, payload: 1)) == .pass)   // idle: nghttp2's PROTOCOL_ERROR
        #expect(c.send(Self.frame(.data, stream: 0, payload: 1)) == .pass)   // stream 0: nghttp2's too
        #expect(c.send(Self.frame(.headers, flags: Self.endHeaders, stream: 2, payload: 3)) == .pass)  // even id
    }

    @Test func framesSplitAcrossReadsAreFollowed() {
        var c = Client()
        let bytes = Self.headers(1, ends: false) + Self.frame(.data, stream: 1, payload: 40_000)
            + Self.frame(.data, flags: Self.endStream, stream: 1, payload: 3) + Self.frame(.data, stream: 1, payload: 1)
        var verdict = HTTP2FrameGuard.Verdict.pass
        var offset = 0
        var chunkStart = 0
        for size in [1, 2, 5, 9, 17, 16_384, 23_624, 1, 1, 1, 100] where offset < bytes.count {
            let end = min(bytes.count, offset + size)
            chunkStart = offset
            verdict = c.send(Array(bytes[offset..<end]))
            offset = end
            if verdict != .pass { break }
        }
        #expect(offset == bytes.count)
        guard case .connectionError(_, let start, .closedStream) = verdict else {
            Issue.record("expected closedStream, got \(verdict)")
            return
        }
        // The offending frame is the last 10 bytes; its start is told relative to its chunk.
        #expect(chunkStart + start == bytes.count - 10)
    }

    @Test func theOffendingFramesStartIsNegativeWhenItsHeaderBeganInAnEarlierRead() {
        var c = Client()
        c.send(Self.headers(1))
        let bad = Self.frame(.data, stream: 1, payload: 1)
        #expect(c.send(Array(bad[..<4])) == .pass)
        #expect(c.send(Array(bad[4...])) == .connectionError(code: HTTP2FrameGuard.streamClosed, frameStart: -4, reason: .closedStream))
    }

    // MARK: Floods

    @Test(arguments: [
        ("SETTINGS", HTTP2FrameGuardTests.frame(.settings)),
        ("SETTINGS ACK", HTTP2FrameGuardTests.frame(.settings, flags: 1)),
        ("PING", HTTP2FrameGuardTests.frame(.ping, payload: 8)),
        ("PRIORITY", HTTP2FrameGuardTests.frame(.priority, stream: 9, payload: 5)),
        ("WINDOW_UPDATE", HTTP2FrameGuardTests.frame(.windowUpdate, payload: 4)),
        ("RST_STREAM", HTTP2FrameGuardTests.frame(.rst, stream: 1, payload: 4)),
        ("unknown type", HTTP2FrameGuardTests.frame(0x42, payload: 3)),
    ])
    func controlFramesPastTheBudgetAreAFlood(_ name: String, _ frame: [UInt8]) {
        var c = Client(burst: 10, perSecond: 5)
        c.send(Self.headers(1, ends: false))
        #expect(c.send(Array(repeating: frame, count: 9).flatMap { $0 }) == .pass, "\(name)")  // 1 spent by the preface SETTINGS
        let verdict = c.send(frame + frame)
        #expect(verdict == .connectionError(code: HTTP2FrameGuard.enhanceYourCalm, frameStart: 0, reason: .flood), "\(name)")
    }

    @Test func theBudgetRefillsWithTimeUpToTheBurst() {
        var c = Client(burst: 10, perSecond: 5)
        let ping = Self.frame(.ping, payload: 8)
        #expect(c.send(Array(repeating: ping, count: 9).flatMap { $0 }) == .pass)
        c.now = 2 * Self.second  // 10 units back, capped at 10
        #expect(c.send(Array(repeating: ping, count: 10).flatMap { $0 }) == .pass)
        #expect(c.reason(ping) == .flood)
    }

    @Test func aSteadyRateUnderTheRefillIsNeverCut() {
        var c = Client(burst: 10, perSecond: 5)
        for i in 1...1000 {
            c.now = UInt64(i) * Self.second / 4  // 4 PINGs a second against 5 refilled
            #expect(c.send(Self.frame(.ping, payload: 8)) == .pass)
        }
    }

    @Test func windowUpdatesForDataWeSentAreNotAFlood() {
        var c = Client(burst: 10, perSecond: 1)
        c.send(Self.headers(1))
        for _ in 0..<10_000 {
            c.guardian.sentDataFrame()
            // the most a client owes for one DATA frame: stream and connection
            #expect(c.send(Self.frame(.windowUpdate, stream: 1, payload: 4) + Self.frame(.windowUpdate, payload: 4)) == .pass)
        }
        // 8 units left (10 after each frame's refill, 2 spent): the budget is what remains.
        #expect(c.send(Array(repeating: Self.frame(.windowUpdate, payload: 4), count: 8).flatMap { $0 }) == .pass)
        #expect(c.reason(Self.frame(.windowUpdate, payload: 4)) == .flood)
    }

    @Test func emptyFramesThatEndNothingCountButEndsAndBodiesDoNot() {
        var c = Client(burst: 10, perSecond: 1)
        c.send(Self.headers(1, ends: false))
        // DATA with bytes, an empty DATA that ends the stream, HEADERS that end their block: free
        for _ in 0..<50 { #expect(c.send(Self.frame(.data, stream: 1, payload: 10)) == .pass) }
        #expect(c.send(Self.frame(.data, flags: Self.endStream, stream: 1, payload: 0)) == .pass)
        var sid: UInt32 = 3
        for _ in 0..<50 {
            #expect(c.send(Self.headers(sid)) == .pass)
            sid += 2
        }
        // Empty DATA on an open stream, empty HEADERS and CONTINUATION that end no block: a unit each
        c.send(Self.headers(sid, ends: false))
        let empty = Self.frame(.data, stream: sid, payload: 0)
        #expect(c.send(Array(repeating: empty, count: 9).flatMap { $0 }) == .pass)
        #expect(c.reason(empty) == .flood)

        var d = Client(burst: 10, perSecond: 1)
        let emptyHeaders = Self.frame(.headers, stream: 1, payload: 0)
        let emptyContinuations = Array(repeating: Self.frame(.continuation, stream: 1, payload: 0), count: 9).flatMap { $0 }
        #expect(d.reason(emptyHeaders + emptyContinuations) == .flood)
    }
}
