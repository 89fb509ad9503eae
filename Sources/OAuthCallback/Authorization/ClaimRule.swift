/// A rule on any id_token claim (`allowed_claims`; Pomerium's `claim/<name>` criteria): the
/// claim at a dotted path (`department`, `realm_access.roles`) must equal a value, contain it
/// (an array claim; a single value counts as a one-element array), or be one of a list.
/// Values compare byte for byte as text: strings as they are, `true`/`false`, numbers as the
/// IdP wrote them. A claim that is absent, `null`, or an object never matches.
public struct ClaimRule: Sendable, Equatable {
    public enum Match: Sendable, Equatable {
        case equals(String)
        case contains(String)
        case oneOf([String])
    }

    /// The claim's name, or a dotted path into nested objects.
    public var claim: String
    public var match: Match

    public init(claim: String, match: Match) {
        self.claim = claim
        self.match = match
    }

    /// Whether the claim's value (as `value(at:in:)` finds it) satisfies the rule.
    public func holds(_ value: JSONValue?) -> Bool {
        guard let value else { return false }
        switch match {
        case .equals(let wanted):
            return Self.text(value)?.sameBytes(wanted) == true
        case .contains(let wanted):
            return Self.elements(value).contains { Self.text($0)?.sameBytes(wanted) == true }
        case .oneOf(let list):
            // A list claim passes when any of its elements is listed.
            return Self.elements(value).contains { e in Self.text(e).map { t in list.contains(where: t.sameBytes) } == true }
        }
    }

    /// Whether `text` names a claim: a name, or a dotted path without empty steps.
    public static func isPath(_ text: String) -> Bool {
        !text.isEmpty && !text.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty)
    }

    /// The value at a dotted path (`realm_access.roles`); nil when a step is missing.
    public static func value(at path: String, in claims: [String: JSONValue]) -> JSONValue? {
        var value: JSONValue? = .object(claims)
        for part in path.split(separator: ".", omittingEmptySubsequences: false) { value = value?[String(part)] }
        return value
    }

    private static func text(_ value: JSONValue) -> String? {
        switch value {
        case .string(let s): return s
        case .bool(let b): return b ? "true" : "false"
        case .number(let n): return n
        case .null, .array, .object: return nil
        }
    }

    private static func elements(_ value: JSONValue) -> [JSONValue] {
        if case .array(let a) = value { return a }
        return [value]
    }
}
