/// Which of the upstream's fields go with the file that replaces its answer. nginx's list (the
/// `redirect` column of `ngx_http_upstream_headers_in`): `Content-Type`, `Content-Disposition`,
/// `Cache-Control`, `Expires`, `Set-Cookie` and `Accept-Ranges` — the last one is ours here
/// (`bytes`, as for every file). Everything else the upstream said is about its own empty body
/// (`Content-Length`, `Transfer-Encoding`, `ETag`, `Last-Modified`: the file has its own) or
/// about the redirect itself (`X-Accel-*`), and goes.
enum AccelKeptField {
    /// The file's type as the app knows it (Rails' `send_file type:`); without it, the type
    /// comes from the file's extension. With the body only (200, 206).
    case contentType
    /// `Content-Disposition` (the download's name): with the body only.
    case representation
    /// `Cache-Control`, `Expires`, `Set-Cookie`: with every answer, a 304 too (RFC 9110
    /// §15.4.5 keeps the first two on a 304; a session cookie must not be lost on any).
    case always

    static func of(_ buffer: UnsafeRawBufferPointer, _ name: ByteRange) -> AccelKeptField? {
        switch name.count {
        case 7: return ByteMatching.equalsLowercase(buffer, name, "expires") ? .always : nil
        case 10: return ByteMatching.equalsLowercase(buffer, name, "set-cookie") ? .always : nil
        case 12: return ByteMatching.equalsLowercase(buffer, name, "content-type") ? .contentType : nil
        case 13: return ByteMatching.equalsLowercase(buffer, name, "cache-control") ? .always : nil
        case 19: return ByteMatching.equalsLowercase(buffer, name, "content-disposition") ? .representation : nil
        default: return nil
        }
    }
}
