/// `x_accel_redirect:` — the app hands a download back to the proxy (nginx's X-Accel-Redirect;
/// Rails' `config.action_dispatch.x_sendfile_header = "X-Accel-Redirect"`, Rack::Sendfile):
/// an upstream answer with `X-Accel-Redirect: /_files/a/b.pdf` is replaced by the file
/// `<root>/a/b.pdf` of the location `/_files`, answered as static files are. Off unless a
/// location is listed.
///
/// Each entry is nginx's `location /_files/ { internal; alias /srv/app/storage/; }`: a client
/// can never ask for a location's path itself (404), and the app learns the mapping from the
/// request fields the proxy sends it (`X-Sendfile-Type`, `X-Accel-Mapping`: `mappingFields`).
public struct AccelRedirectSettings: Sendable, Equatable {
    public struct Location: Sendable, Equatable {
        /// The internal path prefix the app's URIs start with (canonical, segment-matched).
        public var prefix: PathPrefix
        /// The directory its files are under (absolute; spelled as the app spells the file's
        /// path: Rack compares the text of the path, symlinks unresolved).
        public var root: String

        public init(prefix: PathPrefix, root: String) {
            self.prefix = prefix
            self.root = root
        }
    }

    public var locations: [Location] = []

    public init() {}

    public var isEnabled: Bool { !locations.isEmpty }

    /// The request fields that tell Rack::Sendfile to answer with `X-Accel-Redirect` and how
    /// to turn a file's path into a URI: `X-Accel-Mapping` is Rack's list of
    /// `<file-system prefix>=<URI prefix>` pairs, comma-separated, the first whose prefix
    /// starts the path (compared without case) replacing it. Both end in `/`, so that a root
    /// `/srv/storage` maps `/srv/storage/x` and never `/srv/storage2/x`.
    public var mappingFields: String {
        let pairs = locations.map { l -> String in
            let root = l.root.hasSuffix("/") ? l.root : l.root + "/"
            return "\(root)=\(l.prefix)/"
        }
        return "X-Sendfile-Type: X-Accel-Redirect\r\nX-Accel-Mapping: \(pairs.joined(separator: ", "))\r\n"
    }

    /// What is wrong with `root` as a location's directory (for `check`): nil when it is an
    /// absolute path to a directory whose files this process can open, and a path Rack's
    /// `X-Accel-Mapping` can carry (no `,` or `=`, which separate its pairs and their halves;
    /// nothing a header value cannot hold).
    public static func problem(root: String) -> String? {
        if root.contains(",") || root.contains("=") {
            return "'\(root)' holds ',' or '=': X-Accel-Mapping could not carry it"
        }
        if !root.utf8.allSatisfy({ $0 >= 0x21 && $0 < 0x7F }) {
            return "'\(root)' holds spaces, control or non-ASCII characters: X-Accel-Mapping could not carry it"
        }
        // Rack::Sendfile makes a regular expression of the mapping's path without escaping it
        // (`path.sub(/\A#{internal}/i, …)`): these would make every send_file fail or match
        // more than the root.
        if let c = root.first(where: { "()[]{}+*?|\\^$".contains($0) }) {
            return "'\(root)' holds '\(c)', which Rack::Sendfile would read as part of a regular expression"
        }
        return StaticRoot.problem(root)
    }

    /// What is wrong with `prefix` as an internal location: `/` would make every path
    /// internal, and a `,` would split X-Accel-Mapping's pair.
    public static func problem(location prefix: PathPrefix) -> String? {
        if prefix.bytes == [UInt8(ascii: "/")] { return "'/' would make every path internal: name a prefix such as /_files" }
        if prefix.bytes.contains(UInt8(ascii: ",")) {
            return "'\(prefix)' holds ',': X-Accel-Mapping could not carry it"
        }
        return nil
    }
}
