/// A strict RFC 8259 parser for the small JSON documents JOSE deals with (JWT header and
/// claims, JWKS).
///
/// Why not `JSONSerialization`/`JSONDecoder`: they silently keep one of two duplicate member
/// names, and which one differs between parsers. A JWT whose `aud` or `iss` appears twice
/// can therefore mean different things to us and to whatever else reads it (RFC 7519 §4
/// and RFC 7515 §5.2 allow a recipient to reject such input; we do). Writing the parser
/// here makes that check free, keeps Foundation out of the verification path, and gives
/// `Sendable` values.
///
/// Refused: duplicate member names (compared as Swift `String`s, i.e. after Unicode
/// canonical equivalence — stricter, never looser), invalid UTF-8, lone surrogates in
/// `\u` escapes, control characters in strings, leading zeros, `NaN`/`Infinity`,
/// trailing commas, a byte-order mark, anything after the top-level value, and nesting
/// deeper than `maximumDepth`.
public struct JSONParser {
    public struct Failure: Error, Sendable, Equatable {
        public enum Reason: Sendable, Equatable {
            case syntax, duplicateKey, invalidUTF8, tooDeep
        }
        public let reason: Reason
        /// Byte offset where parsing stopped; safe to log (no content).
        public let offset: Int
    }

    public static let defaultMaximumDepth = 32

    public static func parse(_ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(Failure) -> JSONValue {
        let result = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(Failure) -> JSONValue in
                var parser = JSONParser(input: buffer, maximumDepth: maximumDepth)
                parser.skipWhitespace()
                let value = try parser.parseValue(depth: 0)
                parser.skipWhitespace()
                guard parser.position == buffer.count else { throw parser.failure(.syntax) }
                return value
            }
        }
        return try result.get()
    }

    private let input: UnsafeBufferPointer<UInt8>
    private let maximumDepth: Int
    private var position = 0

    private init(input: UnsafeBufferPointer<UInt8>, maximumDepth: Int) {
        self.input = input
        self.maximumDepth = maximumDepth
    }

    private func failure(_ reason: Failure.Reason) -> Failure { Failure(reason: reason, offset: position) }

    private var current: UInt8? { position < input.count ? input[position] : nil }

    private mutating func skipWhitespace() {
        while let c = current, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { position += 1 }
    }

    private mutating func expect(_ literal: StaticString) throws(Failure) {
        let bytes = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard input.count - position >= bytes.count else { throw failure(.syntax) }
        for (i, b) in bytes.enumerated() where input[position + i] != b { throw failure(.syntax) }
        position += bytes.count
    }

    private mutating func parseValue(depth: Int) throws(Failure) -> JSONValue {
        guard let c = current else { throw failure(.syntax) }
        switch c {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw failure(.syntax)
        }
    }

    private mutating func parseObject(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= maximumDepth else { throw failure(.tooDeep) }
        position += 1 // {
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if current == UInt8(ascii: "}") { position += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw failure(.syntax) }
            let keyStart = position
            let key = try parseString()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw failure(.syntax) }
            position += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            guard members.updateValue(value, forKey: key) == nil else {
                throw Failure(reason: .duplicateKey, offset: keyStart)
            }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"): position += 1; return .object(members)
            default: throw failure(.syntax)
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= maximumDepth else { throw failure(.tooDeep) }
        position += 1 // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") { position += 1; return .array(elements) }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): position += 1; return .array(elements)
            default: throw failure(.syntax)
            }
        }
    }

    private mutating func parseNumber() throws(Failure) -> String {
        let start = position
        if current == UInt8(ascii: "-") { position += 1 }
        // int = zero / ( digit1-9 *DIGIT )
        guard let first = current, isDigit(first) else { throw failure(.syntax) }
        position += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            position += 1
            guard let d = current, isDigit(d) else { throw failure(.syntax) }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard let d = current, isDigit(d) else { throw failure(.syntax) }
            skipDigits()
        }
        return String(decoding: UnsafeBufferPointer(rebasing: input[start..<position]), as: UTF8.self)
    }

    private func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while let c = current, isDigit(c) { position += 1 }
    }

    private mutating func parseString() throws(Failure) -> String {
        position += 1 // opening quote
        let start = position
        // Fast path: no escapes — validate the UTF-8 span as it stands.
        while let c = current, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\") {
            guard c >= 0x20 else { throw failure(.syntax) }
            position += 1
        }
        guard let stop = current else { throw failure(.syntax) }
        if stop == UInt8(ascii: "\"") {
            let span = UnsafeBufferPointer(rebasing: input[start..<position])
            guard let s = String(validating: span, as: UTF8.self) else { throw Failure(reason: .invalidUTF8, offset: start) }
            position += 1
            return s
        }
        // Slow path: copy, decoding escapes.
        var bytes = Array(input[start..<position])
        while true {
            guard let c = current else { throw failure(.syntax) }
            switch c {
            case UInt8(ascii: "\""):
                guard let s = String(validating: bytes, as: UTF8.self) else { throw Failure(reason: .invalidUTF8, offset: start) }
                position += 1
                return s
            case UInt8(ascii: "\\"):
                position += 1
                guard let e = current else { throw failure(.syntax) }
                position += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(e)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"): appendUTF8(try parseEscapedScalar(), to: &bytes)
                default: throw failure(.syntax)
                }
            case 0..<0x20:
                throw failure(.syntax)
            default:
                bytes.append(c)
                position += 1
            }
        }
    }

    /// After `\u`: four hex digits, or a surrogate pair written as two escapes.
    private mutating func parseEscapedScalar() throws(Failure) -> Unicode.Scalar {
        let first = try parseHex4()
        switch first {
        case 0xD800...0xDBFF:
            guard input.count - position >= 2, input[position] == UInt8(ascii: "\\"),
                  input[position + 1] == UInt8(ascii: "u") else { throw failure(.syntax) }
            position += 2
            let second = try parseHex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw failure(.syntax) }
            let value = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            return Unicode.Scalar(value)!
        case 0xDC00...0xDFFF:
            throw failure(.syntax)
        default:
            return Unicode.Scalar(first)!
        }
    }

    private mutating func parseHex4() throws(Failure) -> UInt32 {
        guard input.count - position >= 4 else { throw failure(.syntax) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = input[position]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw failure(.syntax)
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }

    private func appendUTF8(_ scalar: Unicode.Scalar, to bytes: inout [UInt8]) {
        UTF8.encode(scalar) { bytes.append($0) }
    }
}
