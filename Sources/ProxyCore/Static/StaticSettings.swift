/// `static:` — files answered from a directory (a Rails app's `public/`) in front of the
/// upstream, as nginx's `try_files $uri @app` with `sendfile`, `gzip_static` and
/// `brotli_static`. Off unless `root` is set.
///
/// A request is answered from a file only where it would otherwise go upstream (after the
/// phases let it through: a path the domain protects is never served to a client it refuses),
/// only for GET and HEAD without a body, and only when its canonical path names a regular
/// file under `root` (`StaticPath`). Everything else — a missing file, a directory, a dotfile
/// or dot-directory, a symlink out of `root` — goes to the upstream as before.
public struct StaticSettings: Sendable, Equatable {
    /// The directory, absolute; nil: static files are off.
    public var root: String? = nil
    /// Paths whose files never change under their name (fingerprinted by the asset pipeline):
    /// answered with `Cache-Control: public, max-age=31536000, immutable`. Others get no
    /// `Cache-Control` (the browser revalidates with the `ETag` or `Last-Modified`).
    public var immutablePaths: [PathPrefix] = StaticSettings.defaultImmutablePaths
    /// Serve `file.br` / `file.gz` beside `file` to a client whose `Accept-Encoding` takes it.
    public var precompressed = true
    /// Follow symlinks that leave `root` (Capistrano links `public/assets` and `public/packs`
    /// to its `shared/` directory). Off: such a link is as if the file did not exist.
    public var symlinksOutsideRoot = false

    public static let defaultImmutablePaths: [PathPrefix] = [PathPrefix(bytes: Array("/assets".utf8)),
                                                             PathPrefix(bytes: Array("/packs".utf8))]

    public init() {}

    public var isEnabled: Bool { root != nil }

    /// What is wrong with `root` (for `check`): nil when it is an absolute path to a directory
    /// whose files this process can open.
    public static func problem(root: String) -> String? { StaticRoot.problem(root) }
}
