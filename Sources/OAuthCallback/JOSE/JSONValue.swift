/// A JSON value as JOSE needs it: parsed strictly (see `JSONParser`), `Sendable`, and with
/// numbers kept as their exact source text so `exp`/`iat` never pass through a `Double`
/// unless they are written with a fraction or exponent.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's text exactly as written (already checked against the RFC 8259 grammar).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The number as a whole count of seconds (an RFC 7519 NumericDate). Integers are read
    /// exactly; a fraction or exponent is allowed by RFC 7519 and is truncated toward
    /// negative infinity. Nil for non-numbers and values outside `Int64`.
    public var int64Value: Int64? {
        guard case .number(let text) = self else { return nil }
        if let exact = Int64(text) { return exact }
        guard let double = Double(text), double.isFinite else { return nil }
        let floored = double.rounded(.down)
        // 2^63 is exactly representable; anything at or above it does not fit.
        guard floored >= -9_223_372_036_854_775_808.0, floored < 9_223_372_036_854_775_808.0 else { return nil }
        return Int64(floored)
    }

    public static func number(_ value: Int64) -> JSONValue { .number(String(value)) }
}
