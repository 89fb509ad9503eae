/// The operator's header rules (`headers:`): fields set, added or removed on every request
/// towards the upstream and on every response towards the client — nginx's `proxy_set_header`,
/// `add_header` and `proxy_hide_header`, Caddy's `header_up`/`header_down`. Values may name
/// `{request_id}` and `{client_address}`.
///
/// No rule can name a field the proxy owns (`isProtected`): the forwarding fields it sets from
/// the connection (a rule could otherwise forge the client address the app trusts), the identity
/// fields session mode sets (checked by the configuration against the names in use), framing and
/// hop-by-hop fields.
public struct HeaderRules: Sendable, Equatable {
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(name: String, value: String) { self.name = name; self.value = value }
    }

    public struct Direction: Sendable, Equatable {
        /// Replaces whatever the other side sent under the name.
        public var set: [Field] = []
        /// Added beside what is there.
        public var add: [Field] = []
        public var remove: [String] = []
        public init() {}
        public var isEmpty: Bool { self.set.isEmpty && add.isEmpty && remove.isEmpty }

        /// The rules as edits, values expanded (`expand` is called only for values with a `{`).
        func apply(to edits: inout HeaderEdits, expand: (String) -> String) {
            for f in set {
                edits.remove.append(f.name)
                edits.add.append((f.name, f.value.contains("{") ? expand(f.value) : f.value))
            }
            edits.remove.append(contentsOf: remove)
            for f in add { edits.add.append((f.name, f.value.contains("{") ? expand(f.value) : f.value)) }
        }
    }

    /// Towards the upstream.
    public var request = Direction()
    /// Towards the client (proxied responses and the proxy's own).
    public var response = Direction()
    public init() {}
    public var isEmpty: Bool { request.isEmpty && response.isEmpty }

    /// Whether no rule may name `name` in that direction (compared without case, `_` as `-`).
    public static func isProtected(_ name: String, request: Bool) -> Bool {
        let n = String(name.lowercased().map { $0 == "_" ? "-" : $0 })
        let framing: Set<String> = ["content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
                                    "upgrade", "proxy-connection"]
        if framing.contains(n) { return true }
        if !request { return n == "content-encoding" }
        let forwarding: Set<String> = ["host", "forwarded", "x-real-ip", "x-request-id", "expect",
                                       "x-sendfile-type", "x-accel-mapping"]
        return forwarding.contains(n) || n.hasPrefix("x-forwarded-")
    }

    /// A field name is an RFC 9110 token.
    public static func isName(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy(ByteMatching.isTokenChar)
    }

    /// A value has field-value characters only (no line breaks, no control bytes).
    public static func isValue(_ s: String) -> Bool {
        s.utf8.allSatisfy(ByteMatching.isFieldValueChar)
    }

    /// The variables a value may name.
    public static let variables = ["request_id", "client_address"]

    /// The first `{name}` in `value` (a name: a letter or `_`, then letters, digits and `_`)
    /// that is not a variable: a misspelt one would otherwise be sent as written, for ever.
    public static func unknownVariable(in value: String) -> String? {
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "{") {
            rest = rest[rest.index(after: open)...]
            guard let close = rest.firstIndex(of: "}") else { return nil }
            let name = rest[..<close]
            let isName = name.first.map { $0 == "_" || ($0.isASCII && $0.isLetter) } == true
                && name.allSatisfy { $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }
            if isName && !variables.contains(String(name)) { return String(name) }
        }
        return nil
    }

    /// `{request_id}` and `{client_address}` replaced.
    static func expand(_ value: String, requestID: () -> String, clientAddress: () -> String) -> String {
        var v = value
        if v.contains("{request_id}") { v = v.replacing("{request_id}", with: requestID()) }
        if v.contains("{client_address}") { v = v.replacing("{client_address}", with: clientAddress()) }
        return v
    }
}
