/// A static file's `Content-Type`, from its name's extension: what a Rails app's `public/`
/// holds (pages, the asset pipeline's and webpack's output, fonts, images, source maps). Text
/// types say `charset=utf-8`, as nginx's `charset utf-8` and Rails' own file server do.
/// Anything else is `application/octet-stream`: a browser downloads it rather than guess
/// (`X-Content-Type-Options: nosniff` goes with every file).
enum StaticMediaType {
    static let fallback: StaticString = "application/octet-stream"

    /// The type for the file at `path` (its last segment's extension, compared without case).
    static func of(_ path: [UInt8]) -> StaticString {
        var dot = path.count
        while dot > 0 {
            dot -= 1
            if path[dot] == UInt8(ascii: ".") { break }
            if path[dot] == UInt8(ascii: "/") || dot == 0 { return fallback }
        }
        let ext = path[(dot + 1)...]
        guard !ext.isEmpty, ext.count <= 5 else { return fallback }
        var lower = ""
        for b in ext { lower.unicodeScalars.append(Unicode.Scalar(b >= 0x41 && b <= 0x5A ? b | 0x20 : b)) }
        switch lower {
        case "html", "htm": return "text/html; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "json", "map": return "application/json"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "avif": return "image/avif"
        case "ico": return "image/vnd.microsoft.icon"
        case "woff": return "font/woff"
        case "woff2": return "font/woff2"
        case "ttf": return "font/ttf"
        case "txt": return "text/plain; charset=utf-8"
        case "xml": return "application/xml"
        case "pdf": return "application/pdf"
        case "wasm": return "application/wasm"
        default: return fallback
        }
    }
}
