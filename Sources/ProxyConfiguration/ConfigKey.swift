/// One key the configuration file accepts, by its path pattern: `timeouts.upstream`,
/// `providers.<name>.native.<platform>.client_id`, `tls.sni[].cert`.
///
/// The loader's list of these (`ConfigLoader.keys`) is what environment overrides are derived
/// from, and what tests hold the loader and `docs/reference.md` to.
public struct ConfigKey: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// One value.
        case value
        /// A list of values (or one value); from the environment, comma-separated.
        case list
        /// A mapping of further keys.
        case section
        /// A list of mappings (`tls.sni`).
        case sections
    }

    public let path: String
    public let kind: Kind

    public init(_ path: String, _ kind: Kind = .value) {
        self.path = path
        self.kind = kind
    }

    public static let environmentPrefix = "CALLBACK_PROXY_"

    /// `CALLBACK_PROXY_TIMEOUTS__UPSTREAM` for `timeouts.upstream`; nil for a key that cannot be
    /// set from the environment: sections, and keys under a name the file chooses (providers).
    public var environmentVariable: String? {
        guard kind == .value || kind == .list, !path.contains("<"), !path.contains("[") else { return nil }
        return Self.environmentPrefix + path.uppercased().split(separator: ".").joined(separator: "__")
    }
}
