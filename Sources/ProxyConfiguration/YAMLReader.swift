import CYAML

/// Reads YAML (and therefore JSON) into `ConfigNode`s with libyaml's event API.
///
/// Refused on purpose: anchors and aliases (a configuration file has no use for them, and
/// they are how "billion laughs" documents explode), tags, several documents in one file,
/// duplicate keys (the second would silently win), and non-scalar keys.
public enum YAMLReader {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let line: Int
        public let message: String
        public var description: String { "line \(line): \(message)" }
    }

    public static func read(_ text: String) throws(Failure) -> ConfigNode {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { throw Failure(line: 0, message: "cannot initialise the YAML parser") }
        defer { yaml_parser_delete(&parser) }
        let bytes = Array(text.utf8)
        return try bytes.withUnsafeBufferPointer { (buf) throws(Failure) -> ConfigNode in
            yaml_parser_set_input_string(&parser, buf.baseAddress, buf.count)
            var reader = EventReader(parser: &parser)
            return try reader.document()
        }
    }
}

private struct EventReader {
    let parser: UnsafeMutablePointer<yaml_parser_t>
    init(parser: UnsafeMutablePointer<yaml_parser_t>) { self.parser = parser }

    enum Event {
        case streamStart, streamEnd, documentStart, documentEnd
        case scalar(String, quoted: Bool)
        case sequenceStart, sequenceEnd, mappingStart, mappingEnd
        case alias
    }

    mutating func next() throws(YAMLReader.Failure) -> (Event, line: Int) {
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) == 1 else {
            let problem = parser.pointee.problem.map { String(cString: $0) } ?? "invalid YAML"
            throw YAMLReader.Failure(line: Int(parser.pointee.problem_mark.line) + 1, message: problem)
        }
        defer { yaml_event_delete(&event) }
        let line = Int(event.start_mark.line) + 1
        switch event.type {
        case YAML_STREAM_START_EVENT: return (.streamStart, line)
        case YAML_STREAM_END_EVENT: return (.streamEnd, line)
        case YAML_DOCUMENT_START_EVENT: return (.documentStart, line)
        case YAML_DOCUMENT_END_EVENT: return (.documentEnd, line)
        case YAML_ALIAS_EVENT: return (.alias, line)
        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            if s.anchor != nil { throw YAMLReader.Failure(line: line, message: "anchors are not supported") }
            if s.tag != nil && s.plain_implicit == 0 && s.quoted_implicit == 0 {
                throw YAMLReader.Failure(line: line, message: "tags are not supported")
            }
            let value = String(decoding: UnsafeBufferPointer(start: s.value, count: s.length), as: UTF8.self)
            return (.scalar(value, quoted: s.style != YAML_PLAIN_SCALAR_STYLE), line)
        case YAML_SEQUENCE_START_EVENT:
            if event.data.sequence_start.anchor != nil { throw YAMLReader.Failure(line: line, message: "anchors are not supported") }
            return (.sequenceStart, line)
        case YAML_SEQUENCE_END_EVENT: return (.sequenceEnd, line)
        case YAML_MAPPING_START_EVENT:
            if event.data.mapping_start.anchor != nil { throw YAMLReader.Failure(line: line, message: "anchors are not supported") }
            return (.mappingStart, line)
        case YAML_MAPPING_END_EVENT: return (.mappingEnd, line)
        default:
            throw YAMLReader.Failure(line: line, message: "unexpected YAML event")
        }
    }

    mutating func document() throws(YAMLReader.Failure) -> ConfigNode {
        guard case .streamStart = try next().0 else { throw YAMLReader.Failure(line: 1, message: "not a YAML stream") }
        let (first, firstLine) = try next()
        if case .streamEnd = first { return .null(line: firstLine) }
        guard case .documentStart = first else { throw YAMLReader.Failure(line: firstLine, message: "expected a document") }
        let root = try node(try next())
        let (end, endLine) = try next()
        guard case .documentEnd = end else { throw YAMLReader.Failure(line: endLine, message: "unexpected content after the document") }
        let (after, afterLine) = try next()
        guard case .streamEnd = after else { throw YAMLReader.Failure(line: afterLine, message: "only one document per file is allowed") }
        return root
    }

    mutating func node(_ start: (Event, line: Int)) throws(YAMLReader.Failure) -> ConfigNode {
        let (event, line) = start
        switch event {
        case .scalar(let v, let quoted):
            if !quoted && (v.isEmpty || v == "~" || v == "null" || v == "Null" || v == "NULL") { return .null(line: line) }
            return .scalar(v, line: line, quoted: quoted)
        case .alias:
            throw YAMLReader.Failure(line: line, message: "aliases are not supported")
        case .sequenceStart:
            var items: [ConfigNode] = []
            while true {
                let e = try next()
                if case .sequenceEnd = e.0 { return .sequence(items, line: line) }
                items.append(try node(e))
            }
        case .mappingStart:
            var entries: [(key: String, value: ConfigNode)] = []
            while true {
                let e = try next()
                if case .mappingEnd = e.0 { return .mapping(entries, line: line) }
                guard case .scalar(let key, _) = e.0 else {
                    throw YAMLReader.Failure(line: e.line, message: "keys must be plain values")
                }
                if entries.contains(where: { $0.key == key }) {
                    throw YAMLReader.Failure(line: e.line, message: "duplicate key '\(key)'")
                }
                entries.append((key, try node(try next())))
            }
        default:
            throw YAMLReader.Failure(line: line, message: "unexpected structure")
        }
    }
}
