import COpenSSL

/// OpenSSL reports errors on a per-thread queue. Every failure path in this module drains it:
/// leftovers would be misread by the next caller that inspects the queue (SSL_get_error).
enum OpenSSLErrorQueue {
    /// Removes every queued error and returns the first one's reason string, if any.
    /// Reason strings name the library and the check that failed; they carry no data.
    @discardableResult
    static func drain() -> String? {
        let first = ERR_get_error()
        guard first != 0 else { return nil }
        ERR_clear_error()
        var buffer = [CChar](repeating: 0, count: 256)
        let reason: String = buffer.withUnsafeMutableBufferPointer { buf in
            ERR_error_string_n(first, buf.baseAddress, buf.count)
            return String(cString: buf.baseAddress!)
        }
        return reason
    }
}
