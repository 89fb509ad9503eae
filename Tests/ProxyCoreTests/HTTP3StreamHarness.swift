import CNghttp3
@testable import ProxyCore

/// Hosts `HTTP3Stream`s the way `HTTP3Connection` does, with no QUIC and no socket: the test
/// plays nghttp3 (it delivers request fields and bytes, pulls the response body, acknowledges it,
/// closes streams) and reads what the streams asked of the libraries. Everything between is the
/// real engine: the stream, its exchange, the phases, and a real upstream connection to an
/// `EmbeddedUpstream` the test answers as the app. One thread, the test's; the loop turns by hand.
final class HTTP3StreamHarness: HTTP3StreamHost {
    let loop: EventLoop
    let listener: ListenerContext
    let peer = PeerAddress(text: "192.0.2.10")!
    lazy var peerTextCache: [UInt8] = peer.textBytes
    var streamsBound = true
    let upstream: EmbeddedUpstream

    /// A response head as nghttp3 was given it.
    struct Head: Equatable {
        var fields: [String: String]
        var status: Int { Int(fields[":status"] ?? "") ?? 0 }
    }

    // What the streams asked of the libraries, by stream ID.
    private(set) var informational: [Int64: [Head]] = [:]
    private(set) var responses: [Int64: (head: Head, withBody: Bool)] = [:]
    /// Final heads nghttp3 was given, on all streams (each stream's must be one).
    private(set) var submissions = 0
    private(set) var resets: [Int64: UInt64] = [:]
    private(set) var credited: [Int64: Int] = [:]
    private(set) var stoppedReading: Set<Int64> = []
    private(set) var resumed: [Int64: Int] = [:]
    private(set) var closedStreams: Set<Int64> = []
    /// Set to make nghttp3 refuse the next final head.
    var refuseResponses = false

    // The lists the connection runs after the library returns.
    private var pending: [HTTP3Stream] = []
    private var held: [HTTP3Stream] = []
    private var drainedStreams: [HTTP3Stream] = []
    private var ended: [HTTP3Stream] = []
    /// The streams, as the connection's table holds them.
    private var streams: [Int64: HTTP3Stream] = [:]

    init(phases: any HTTPPhases = PassThrough(), configure: (inout ProxyConfig) -> Void = { _ in }) throws {
        upstream = try EmbeddedUpstream()
        loop = try EventLoop(index: 0)
        var config = ProxyConfig()
        configure(&config)
        listener = upstream.listener(named: "embedded-h3", phases: phases, config: config)
    }

    deinit {
        for s in streams.values { s.exchange.close() }
    }

    struct PassThrough: HTTPPhases {}

    // MARK: The test plays nghttp3

    /// A request stream opens and its HEADERS arrive, field by field as QPACK decodes them, then
    /// end (`endStream`: FIN with them; `early`: in 0-RTT packets). The stream runs, as the
    /// connection runs its pending streams.
    @discardableResult
    func open(_ id: Int64, _ fields: [(String, String)], endStream: Bool = true, early: Bool = false,
              waiting: Bool = false) -> HTTP3Stream {
        let s = HTTP3Stream(host: self, id: id)
        streams[id] = s
        if waiting { s.waitingSince = loop.now }
        for (name, value) in fields {
            let name = Array(name.utf8), value = Array(value.utf8)
            name.withUnsafeBufferPointer { n in
                value.withUnsafeBufferPointer { v in s.request.field(name: n, value: v, limit: 64 * 1024) }
            }
        }
        s.receivedHead(endStream: endStream, early: early)
        runStreams()
        return s
    }

    /// Request DATA arrives (false: the exchange was done with it).
    @discardableResult
    func data(_ s: HTTP3Stream, _ text: String, end: Bool = false) -> Bool {
        var bytes = Array(text.utf8)
        let taken = bytes.withUnsafeMutableBytes { s.receivedData(UnsafeRawBufferPointer($0)) }
        if end { s.receivedEnd() }
        runStreams()
        return taken
    }

    /// A stream that waited for a budget unit gets one (`HTTP3Connection+Admission.started`).
    func admit(_ s: HTTP3Stream) {
        s.waitingSince = 0
        if s.exchange.input.readable > 0 { markPending(s) }
        runStreams()
    }

    /// A stream waited too long for a unit (`HTTP3Connection+Admission`'s retry).
    func refuse(_ s: HTTP3Stream) {
        s.refused = true
        s.received()
        runStreams()
    }

    /// nghttp3 pulls the body as its callback would, until the stream has nothing more now or the
    /// body ends: the bytes it would send, and whether the last pull said EOF.
    func pull(_ s: HTTP3Stream) -> (bytes: [UInt8], end: Bool) {
        guard responses[s.id]?.withBody == true else { return ([], false) }
        var bytes: [UInt8] = []
        while let pulled = s.pullBody() {
            if let chunk = pulled.chunk { bytes += UnsafeRawBufferPointer(chunk) }
            if pulled.end {
                runStreams()
                return (bytes, true)
            }
        }
        runStreams()
        return (bytes, false)
    }

    /// The client acknowledges `count` bytes of the stream's body; a stream that waited for
    /// acknowledgements resumes, as the connection's `resumable` list does.
    func acknowledge(_ s: HTTP3Stream, _ count: Int) {
        if s.acknowledged(count) { s.resume() }
        runStreams()
    }

    /// nghttp3 closes the stream (`code`: H3_NO_ERROR after FIN both ways, else a reset).
    func close(_ s: HTTP3Stream, code: UInt64 = UInt64(NGHTTP3_H3_NO_ERROR)) {
        s.closed(errorCode: code)
        runStreams()
    }

    /// Our QPACK streams open (the 1-RTT keys came): held responses flush.
    func bindStreams() {
        streamsBound = true
        runStreams()
    }

    /// Turns the loop (the upstream's events, deferred answers), pumping the app's socket, until
    /// `done` holds or `seconds` pass. Returns whether `done` held.
    @discardableResult
    func run(until done: () -> Bool, seconds: Double = 5) -> Bool {
        let end = EventLoop.monotonicNow() + UInt64(seconds * 1e9)
        while true {
            upstream.pump()
            runStreams()
            if done() { return true }
            if EventLoop.monotonicNow() >= end { return false }
            loop.turn(longestWaitMS: 10)
        }
    }

    /// The upstream request the app has read so far, as text, once its head is whole (and then
    /// `bodyBytes` more), or nil within `seconds`.
    func upstreamRequest(bodyBytes: Int = 0, seconds: Double = 5) -> String? {
        let whole = run(until: {
            guard let end = upstream.received.firstRange(of: [13, 10, 13, 10]) else { return false }
            return upstream.received.count >= end.upperBound + bodyBytes
        }, seconds: seconds)
        return whole ? String(decoding: upstream.received, as: UTF8.self) : nil
    }

    /// The timer a stream's exchange runs passes, as the connection's sweep finds it.
    func timerPasses(_ s: HTTP3Stream) {
        guard s.deadline != 0 else { return }
        s.deadline = 0
        s.exchange.timedOut()
        runStreams()
    }

    private func runStreams() {
        if streamsBound && !held.isEmpty {
            let ready = held
            held.removeAll()
            for s in ready where !s.exchange.isClosed { s.flush() }
        }
        while !pending.isEmpty || !drainedStreams.isEmpty || !ended.isEmpty {
            for s in ended { stopReading(s.id) }
            ended.removeAll()
            let ready = pending
            pending.removeAll()
            for s in ready where !s.exchange.isClosed { s.run() }
            let drained = drainedStreams
            drainedStreams.removeAll()
            for s in drained where !s.exchange.isClosed { s.outputDrained() }
        }
    }

    // MARK: HTTP3StreamHost

    func submitInformational(_ head: StreamHeadWriter, on stream: Int64) -> Bool {
        informational[stream, default: []].append(Self.head(head))
        return true
    }

    func submitResponse(_ head: StreamHeadWriter, withBody: Bool, on stream: Int64) -> Bool {
        guard !refuseResponses else { return false }
        responses[stream] = (Self.head(head), withBody)
        submissions += 1
        return true
    }

    func resumeBody(_ stream: Int64) { resumed[stream, default: 0] += 1 }
    func credit(_ stream: Int64, bytes: Int) { credited[stream, default: 0] += bytes }
    func resetStream(_ stream: Int64, code: UInt64) { resets[stream] = code }
    func stopReading(_ stream: Int64) { stoppedReading.insert(stream) }
    func scheduleWrite() {}

    func markPending(_ stream: HTTP3Stream) {
        guard !stream.queued else { return }
        stream.queued = true
        pending.append(stream)
    }

    func holdForStreams(_ stream: HTTP3Stream) {
        if !held.contains(where: { $0 === stream }) { held.append(stream) }
    }

    func markDrained(_ stream: HTTP3Stream) { drainedStreams.append(stream) }
    func markEndedEarly(_ stream: HTTP3Stream) { ended.append(stream) }

    func streamClosed(_ stream: HTTP3Stream) {
        closedStreams.insert(stream.id)
        streams[stream.id] = nil
    }

    private static func head(_ writer: StreamHeadWriter) -> Head {
        writer.withFields { base, spans in
            var fields: [String: String] = [:]
            for s in spans {
                let name = String(decoding: UnsafeBufferPointer(start: base + s.name, count: s.nameLength), as: UTF8.self)
                let value = String(decoding: UnsafeBufferPointer(start: base + s.value, count: s.valueLength), as: UTF8.self)
                fields[name] = value
            }
            return Head(fields: fields)
        }
    }
}
