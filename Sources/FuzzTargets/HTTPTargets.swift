import ProxyCore

/// The engine's parsers: what a client or an upstream can send.
enum HTTPTargets {
    /// Whole, byte by byte and split in two, the request head parses to the same outcome and
    /// (when complete) to the same head: a parser that depends on how reads fall is a
    /// smuggling bug waiting for a slow network.
    static func requestHead(_ data: UnsafeRawBufferPointer) {
        let parser = RequestParser()
        var whole = RequestHead()
        let once = parser.parseHead(data, into: &whole)
        var growing = RequestHead()
        var first: HeadParseResult = .incomplete
        for n in stride(from: 1, through: data.count, by: max(1, data.count / 7)) {
            first = parser.parseHead(UnsafeRawBufferPointer(rebasing: data[0..<n]), into: &growing)
            if case .incomplete = first { continue }
            break
        }
        if case .incomplete = first, data.count > 0 {
            first = parser.parseHead(data, into: &growing)
        }
        // A prefix may complete earlier than the whole (the head ends before the data does):
        // then both must agree on that length; an error may come earlier, never a different head.
        switch (once, first) {
        case (.complete(let a), .complete(let b)):
            FuzzTargets.require(a == b, "head length \(a) whole, \(b) in pieces")
            FuzzTargets.require(whole.method == growing.method && whole.keepAlive == growing.keepAlive
                                && whole.framing == growing.framing, "the same head parsed differently in pieces")
        case (.complete, .error), (.error, .complete):
            FuzzTargets.require(false, "whole: \(once), in pieces: \(first)")
        default:
            break
        }
    }

    static func responseHead(_ data: UnsafeRawBufferPointer) {
        let parser = ResponseParser()
        var head = ResponseHead()
        for method in [HTTPMethod.get, .head] { _ = parser.parseHead(data, requestMethod: method, into: &head) }
    }

    /// Decoded whole and one byte at a time, a chunked body yields the same bytes and ends
    /// (or fails) at the same place.
    static func chunked(_ data: UnsafeRawBufferPointer) {
        func run(step: Int) -> (bytes: [UInt8], end: Int?, failed: Bool) {
            var decoder = ChunkedDecoder()
            var out: [UInt8] = []
            var offset = 0
            var limit = min(data.count, step)
            while offset <= data.count {
                let view = UnsafeRawBufferPointer(rebasing: data[0..<limit])
                let (event, consumed) = decoder.decode(view, from: offset)
                offset += consumed
                switch event {
                case .data(let range): out += view[range.start..<(range.start + range.count)]
                case .end: return (out, offset, false)
                case .error: return (out, offset, true)
                case .needMore:
                    if limit == data.count { return (out, nil, false) }
                    limit = min(data.count, limit + step)
                }
            }
            return (out, nil, false)
        }
        let whole = run(step: max(1, data.count)), bytewise = run(step: 1)
        FuzzTargets.require(whole.bytes == bytewise.bytes && whole.end == bytewise.end && whole.failed == bytewise.failed,
                            "chunked body decoded differently byte by byte")
    }

    /// A canonical path is a fixed point: canonicalizing it again changes nothing.
    static func path(_ data: UnsafeRawBufferPointer) {
        var out: [UInt8] = []
        guard case .rewritten = PathCanonicalizer.canonicalize(data, into: &out) else { return }
        var again: [UInt8] = []
        let second = out.withUnsafeBytes { PathCanonicalizer.canonicalize($0, into: &again) }
        if case .rewritten = second { FuzzTargets.require(again == out, "canonical path changed on a second pass") }
    }

    static func proxyProtocol(_ data: UnsafeRawBufferPointer) {
        var reader = ProxyHeaderReader()
        var offset = 0
        while offset < data.count {
            let n = min(reader.nextRead, data.count - offset)
            guard n > 0 else { return }
            let outcome = reader.add(UnsafeRawBufferPointer(rebasing: data[offset..<(offset + n)]))
            offset += n
            if case .incomplete = outcome { continue }
            return
        }
    }
}
