/// Where an upstream's `X-Accel-Redirect` points, decided on the field's bytes alone (no
/// system call; `AccelRedirectTests`). The value is a URI path as the app wrote it — Rack
/// percent-escapes it (`Rack::Utils.escape_path`, and `?` as `%3F`) — optionally with a query,
/// which is ignored.
///
/// - The location is the longest configured prefix the path starts with, on a segment boundary,
///   escapes decoded for the comparison (an escaped `/` never counts as one). None — or a named
///   location (`@files`), which nginx has and this proxy has not — is `unmapped`: the proxy
///   cannot follow it (502, and the operator hears of it).
/// - The rest of the path names the file under the location's root by `StaticPath`'s rules:
///   no directory, no segment that begins with `.` (so no `..`, no dotfile), no escaped `/` or
///   NUL. Anything else is `refused`: a 404, as nginx answers a URI it will not map
///   (`ngx_http_parse_unsafe_uri`). Symlinks that leave the root are the kernel's to refuse
///   when the file is opened.
enum AccelTarget: Equatable {
    /// The file `relative` (`StaticPath`'s form) under the root of location `location`.
    case file(location: Int, relative: [UInt8])
    case refused
    case unmapped

    static func resolve(_ value: UnsafeRawBufferPointer, _ prefixes: [PathPrefix]) -> AccelTarget {
        var end = value.count
        if let q = value.firstIndex(of: UInt8(ascii: "?")) { end = q }
        var start = 0
        while start < end, ByteMatching.isWhitespace(value[start]) { start += 1 }
        while end > start, ByteMatching.isWhitespace(value[end - 1]) { end -= 1 }
        let path = UnsafeRawBufferPointer(rebasing: value[start..<end])
        guard path.first == UInt8(ascii: "/") else { return .unmapped }
        var best: (index: Int, length: Int, rawEnd: Int)? = nil
        for (i, prefix) in prefixes.enumerated() where prefix.bytes.count > (best?.length ?? 0) {
            if let rawEnd = matchedEnd(prefix.bytes, in: path) { best = (i, prefix.bytes.count, rawEnd) }
        }
        guard let best else { return .unmapped }
        guard let relative = StaticPath.relative(UnsafeRawBufferPointer(rebasing: path[best.rawEnd...])) else { return .refused }
        return .file(location: best.index, relative: relative)
    }

    /// Where in `path` the prefix ends when `path` is `prefix` followed by `/…` (escapes in
    /// `path` decoded for the comparison, an escaped `/` never matching) or is the bare prefix
    /// (the location's directory: no file, refused by `StaticPath`), else nil.
    private static func matchedEnd(_ prefix: [UInt8], in path: UnsafeRawBufferPointer) -> Int? {
        var i = 0
        for expected in prefix {
            guard i < path.count else { return nil }
            guard let (b, width) = ByteMatching.decodedByte(path, at: i) else { return nil }
            // An escaped `/` is no segment boundary.
            if width == 3 && b == UInt8(ascii: "/") { return nil }
            i += width
            if b != expected { return nil }
        }
        return i == path.count || path[i] == UInt8(ascii: "/") ? i : nil
    }
}
