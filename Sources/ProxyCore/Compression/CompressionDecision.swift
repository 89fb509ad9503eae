/// Whether one response is compressed (`CompressionSettings` says which ones are), decided
/// from facts the exchange reads off the request and the response head. Pure: the rules are
/// tested one by one without sockets (CompressionTests).
enum CompressionDecision: Equatable {
    /// Compress with this coding.
    case compress(ContentCoding)
    /// Sent as it is, but another client would have had it compressed: caches must key it on
    /// Accept-Encoding (`Vary`).
    case varyOnly
    /// Sent as it is, whatever the client accepts.
    case none

    /// What the decision reads.
    struct Facts {
        var isHead = false
        var http10 = false
        /// The request's Accept-Encoding (all its fields), or nil.
        var acceptEncoding: UnsafeRawBufferPointer? = nil
        var pathExcluded = false
        var status = 200
        /// The response has a body to send (not a 204/304, nor framed as empty).
        var hasBody = true
        /// Its Content-Length, when it has one.
        var length: UInt64? = nil
        /// Its Content-Type, or nil.
        var contentType: UnsafeRawBufferPointer? = nil
        var hasContentEncoding = false
        var noTransform = false
    }

    static func decide(_ settings: CompressionSettings, _ f: Facts) -> CompressionDecision {
        guard settings.isEnabled, eligible(settings, f) else { return .none }
        guard let accept = f.acceptEncoding,
              let coding = AcceptEncoding.choose(accept, offered: settings.codings) else { return .varyOnly }
        return .compress(coding)
    }

    /// Everything but the client's Accept-Encoding.
    private static func eligible(_ s: CompressionSettings, _ f: Facts) -> Bool {
        if f.isHead || f.http10 || f.pathExcluded || !f.hasBody { return false }
        switch f.status {
        case 101, 204, 206, 304: return false
        case ..<200: return false
        default: break
        }
        if f.hasContentEncoding || f.noTransform { return false }
        if let length = f.length, length < s.minLength { return false }
        guard let type = f.contentType else { return false }
        return typeMatches(type, s.types)
    }

    /// `text/html; charset=utf-8` against `text/html` or `text/*`, without case.
    static func typeMatches(_ value: UnsafeRawBufferPointer, _ types: [String]) -> Bool {
        var end = 0
        while end < value.count && value[end] != UInt8(ascii: ";") { end += 1 }
        let media = WeightedList.trimmed(value, 0, end)
        for t in types {
            var pattern = t
            if t.hasSuffix("/*") {
                // `text/*`: the type and its slash.
                pattern.removeLast()
                if media.count > pattern.utf8.count && equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: media[0..<pattern.utf8.count]), pattern) {
                    return true
                }
            } else if media.count == pattern.utf8.count && equalsIgnoringCase(media, pattern) {
                return true
            }
        }
        return false
    }

    private static func equalsIgnoringCase(_ b: UnsafeRawBufferPointer, _ s: String) -> Bool {
        var i = 0
        for c in s.utf8 {
            guard i < b.count, WeightedList.lower(b[i]) == WeightedList.lower(c) else { return false }
            i += 1
        }
        return i == b.count
    }
}
