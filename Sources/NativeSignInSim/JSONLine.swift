import Foundation

/// A problem with a request line; the answer is `{"error": message}`.
struct SimError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// One request line: a JSON object whose fields are read with their types checked, and in
/// which a field no operation reads is an error (a misspelt field must not pass unnoticed).
struct JSONLine {
    private let fields: [String: Any]

    init(_ line: String) throws {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)),
              let fields = object as? [String: Any] else {
            throw SimError("a request is one JSON object on one line")
        }
        self.fields = fields
    }

    init(object: Any, field: String) throws {
        guard let fields = object as? [String: Any] else { throw SimError("\(field) must be an object") }
        self.fields = fields
    }

    /// Refuses any field not in `allowed`.
    func only(_ allowed: Set<String>) throws {
        if let extra = fields.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw SimError("unknown field \"\(extra)\"")
        }
    }

    func string(_ name: String) throws -> String {
        guard let value = try optionalString(name) else { throw SimError("\(name) is required") }
        return value
    }

    func optionalString(_ name: String) throws -> String? {
        guard let value = fields[name], !(value is NSNull) else { return nil }
        guard let string = value as? String else { throw SimError("\(name) must be a string") }
        return string
    }

    func url(_ name: String) throws -> URL {
        guard let url = URL(string: try string(name)) else { throw SimError("\(name) is not a URL") }
        return url
    }

    func optionalURL(_ name: String) throws -> URL? {
        guard let text = try optionalString(name) else { return nil }
        guard let url = URL(string: text) else { throw SimError("\(name) is not a URL") }
        return url
    }

    func bool(_ name: String) throws -> Bool {
        guard let value = fields[name] as? Bool else { throw SimError("\(name) must be true or false") }
        return value
    }

    func optionalBool(_ name: String) throws -> Bool? {
        guard let value = fields[name], !(value is NSNull) else { return nil }
        return try bool(name)
    }

    /// An array of strings; absent is empty.
    func strings(_ name: String) throws -> [String] {
        guard let value = fields[name], !(value is NSNull) else { return [] }
        guard let array = value as? [String] else { throw SimError("\(name) must be an array of strings") }
        return array
    }

    func objects(_ name: String) throws -> [JSONLine] {
        guard let value = fields[name], !(value is NSNull) else { return [] }
        guard let array = value as? [Any] else { throw SimError("\(name) must be an array") }
        return try array.map { try JSONLine(object: $0, field: name) }
    }

    /// The raw value, for fields of more than one shape.
    func value(_ name: String) -> Any? {
        fields[name]
    }

    /// One answer line: sorted keys, `/` unescaped, a newline at the end.
    static func encode(_ answer: [String: Any]) -> Data {
        var data = (try? JSONSerialization.data(withJSONObject: answer, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data(#"{"error":"the answer could not be encoded"}"#.utf8)
        data.append(UInt8(ascii: "\n"))
        return data
    }
}
