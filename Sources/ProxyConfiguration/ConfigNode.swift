/// A parsed configuration document: mappings, sequences and scalars, each with the line it
/// came from so every problem can be reported at its place. Scalars stay text; the schema
/// decides what a value means (so `on`/`yes` never silently become booleans).
public indirect enum ConfigNode: Sendable {
    case scalar(String, line: Int, quoted: Bool)
    case mapping([(key: String, value: ConfigNode)], line: Int)
    case sequence([ConfigNode], line: Int)
    case null(line: Int)

    public var line: Int {
        switch self {
        case .scalar(_, let l, _), .mapping(_, let l), .sequence(_, let l), .null(let l): return l
        }
    }

    var kindName: String {
        switch self {
        case .scalar: return "a value"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .null: return "nothing"
        }
    }
}
