/// Which file under the static root a request's path names, decided on the path's bytes alone
/// (no system call; `StaticPathTests`). The path is the canonical one (`PathCanonicalizer`):
/// dot-segments are gone, `//` merged, `%2F`, `%00` and `\` refused, so it has one spelling.
/// The rules here are the static layer's own on top of that, each refusal a fall-through to the
/// upstream (the app answers as if no file were there):
///
/// - a path ending in `/` is a directory: no index, no listing (nginx without `autoindex`, and
///   without an `index` for `try_files $uri`);
/// - no segment may begin with `.` — dotfiles and dot-directories (`/.env`, `/.git/config`,
///   `/.well-known/…`) are never read from the root, and `.`/`..` could not reach it anyway;
/// - the rest of the percent-escapes are decoded (`/my%20file.png` is `my file.png`); a
///   decoded `/` or NUL, or a path longer than `maxLength`, is refused.
///
/// Symlinks are the kernel's to check when the file is opened (`StaticFile.open`).
enum StaticPath {
    /// Longest relative path looked up (Linux's PATH_MAX is 4096; no asset comes near this).
    static let maxLength = 1024

    /// The path relative to the root (`assets/app.css`), or nil: not a file the root serves.
    static func relative(_ path: UnsafeRawBufferPointer) -> [UInt8]? {
        guard path.count > 1, path.count <= maxLength, path[0] == slash, path[path.count - 1] != slash else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(path.count + 4)
        var i = 1
        var segmentStart = true
        while i < path.count {
            var b = path[i]
            if b == slash {
                // (`//` is merged by the canonicalizer; an empty segment here is not a file.)
                if segmentStart { return nil }
                out.append(b)
                segmentStart = true
                i += 1
                continue
            }
            guard let (decoded, width) = ByteMatching.decodedByte(path, at: i) else { return nil }
            b = decoded
            i += width
            if b == 0 || b == slash { return nil }
            if segmentStart && b == dot { return nil }
            segmentStart = false
            out.append(b)
        }
        return out
    }

    private static let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
}
