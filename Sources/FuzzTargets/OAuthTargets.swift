import OAuthCallback

/// The OAuth layer's parsers: the callback's query (anyone can load it), and what an IdP or the
/// store answers (a compromised or broken one must not crash the proxy).
enum OAuthTargets {
    static func callbackQuery(_ data: UnsafeRawBufferPointer) {
        _ = CallbackParameters.parse(query: Array(data))
    }

    /// Parsed JSON serializes to JSON that parses to the same value.
    static func json(_ data: UnsafeRawBufferPointer) {
        guard let value = try? JSONParser.parse(Array(data)) else { return }
        let again = try? JSONParser.parse(value.serialized())
        FuzzTargets.require(again == value, "JSON changed through serialize and parse")
    }

    static func jwt(_ data: UnsafeRawBufferPointer) {
        _ = try? JWT(compact: String(decoding: data, as: UTF8.self))
    }

    static func jwks(_ data: UnsafeRawBufferPointer) {
        _ = try? JWKSet(json: Array(data))
    }

    /// The first line is the allow-list (space-separated hosts), the rest the `rd` value; an
    /// accepted redirect is either a local path or names an allowed host.
    static func redirect(_ data: UnsafeRawBufferPointer) {
        let text = String(decoding: data, as: UTF8.self)
        let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let hosts = parts.first.map { $0.split(separator: " ").map(String.init) } ?? []
        let validator = RedirectValidator(allowedHosts: hosts.filter(RedirectValidator.isValidEntry))
        let rd = parts.count > 1 ? String(parts[1]) : ""
        if let accepted = validator.validate(rd) {
            // (Schemes are case-insensitive: `Https://` is absolute.)
            let lower = accepted.lowercased()
            FuzzTargets.require(accepted.hasPrefix("/") && !accepted.hasPrefix("//") && !accepted.hasPrefix("/\\")
                                || lower.hasPrefix("https://") || lower.hasPrefix("http://"),
                                "accepted redirect \(accepted) is neither local nor absolute")
            FuzzTargets.require(!hosts.isEmpty || accepted.hasPrefix("/"), "absolute redirect \(accepted) with no allowed host")
        }
    }

    /// Fed whole and one byte at a time, the reply stream gives the same replies.
    static func redisReply(_ data: UnsafeRawBufferPointer) {
        func replies(step: Int) -> [RedisReply]? {
            let parser = RedisReplyParser()
            var out: [RedisReply] = []
            var offset = 0
            while offset < data.count {
                let end = min(data.count, offset + step)
                if parser.feed(UnsafeRawBufferPointer(rebasing: data[offset..<end])) != nil { return nil }
                offset = end
                drain: while true {
                    switch parser.next() {
                    case .reply(let r): out.append(r)
                    case .needMore: break drain
                    case .protocolError: return nil
                    }
                }
            }
            return out
        }
        FuzzTargets.require(replies(step: max(1, data.count)) == replies(step: 1), "redis replies differ byte by byte")
    }
}
