extension JSONValue {
    /// Compact JSON text. Object members are written in sorted key order, so the output is
    /// deterministic (useful for tests and for signing).
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        write(to: &out)
        return out
    }

    public var serializedString: String { String(decoding: serialized(), as: UTF8.self) }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                element.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, key) in members.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func writeString(_ s: String, to out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex.utf8Start[Int(byte >> 4)])
                out.append(hex.utf8Start[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
