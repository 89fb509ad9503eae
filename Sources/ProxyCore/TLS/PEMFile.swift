import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// Certificates and keys read from PEM files. Each file is read once per load (start-up or
/// reload) into memory we own, parsed from there, and the memory is wiped before it is
/// freed, so key bytes do not linger in the heap. Errors name the file and the problem,
/// never the contents.
enum PEMFile {
    /// Files larger than this are not certificates or keys.
    static let maxSize = 1 << 20

    /// The leaf certificate and the chain after it (owned: free with `X509_free`).
    static func certificateChain(_ path: String) throws(TLSSetupError) -> (leaf: OpaquePointer, chain: [OpaquePointer]) {
        let certs = try certificates(path)
        return (certs[0], Array(certs.dropFirst()))
    }

    /// Every certificate in the file, in order (at least one).
    static func certificates(_ path: String) throws(TLSSetupError) -> [OpaquePointer] {
        try withContents(path) { bio throws(TLSSetupError) in
            var out: [OpaquePointer] = []
            while let cert = out.isEmpty ? PEM_read_bio_X509_AUX(bio, nil, nil, nil) : PEM_read_bio_X509(bio, nil, nil, nil) {
                out.append(cert)
            }
            // The loop ends on "no start line" at the end of the file: expected, not an error.
            TLSErrorQueue.clear()
            if out.isEmpty { throw TLSSetupError(file: path, "holds no PEM certificate") }
            return out
        }
    }

    /// The private key (owned: free with `EVP_PKEY_free`).
    static func privateKey(_ path: String) throws(TLSSetupError) -> OpaquePointer {
        try withContents(path) { bio throws(TLSSetupError) in
            // A callback that supplies no passphrase: without one OpenSSL would prompt on the
            // terminal for an encrypted key.
            let noPassphrase: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { _, _, _, _ in -1 }
            guard let key = PEM_read_bio_PrivateKey(bio, nil, noPassphrase, nil) else {
                let reason = TLSErrorQueue.drain() ?? "unknown error"
                if reason.contains("bad decrypt") || reason.contains("bad password") || reason.contains("interrupted or cancelled") {
                    throw TLSSetupError(file: path, "is a passphrase-protected key (not supported: give an unencrypted key with restricted file permissions)")
                }
                throw TLSSetupError(file: path, "holds no usable PEM private key (\(reason))")
            }
            return key
        }
    }

    /// Reads the whole file, hands it to `body` as a read-only memory BIO, then wipes it.
    private static func withContents<R>(_ path: String, _ body: (OpaquePointer) throws(TLSSetupError) -> R) throws(TLSSetupError) -> R {
        try withBytes(path) { (raw: UnsafeRawBufferPointer) throws(TLSSetupError) -> R in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else {
                TLSErrorQueue.clear()
                throw TLSSetupError(file: path, "cannot be parsed (out of memory)")
            }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }

    /// Reads the whole file (a regular file, at most `maxSize`, not empty), hands its bytes to
    /// `body`, then wipes them.
    static func withBytes<R>(_ path: String, _ body: (UnsafeRawBufferPointer) throws(TLSSetupError) -> R) throws(TLSSetupError) -> R {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw TLSSetupError(file: path, "cannot be read: \(SystemError(call: "open", errno: lastErrno()).reason)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw TLSSetupError(file: path, "cannot be read: \(SystemError(call: "fstat", errno: lastErrno()).reason)") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw TLSSetupError(file: path, "is not a regular file") }
        guard info.st_size <= maxSize else { throw TLSSetupError(file: path, "is larger than 1 MiB") }
        let capacity = Int(info.st_size) + 1
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        var length = 0
        defer {
            OPENSSL_cleanse(buffer, capacity)
            buffer.deallocate()
        }
        while length < capacity {
            let n = read(fd, buffer + length, capacity - length)
            if n == 0 { break }
            if n < 0 {
                if lastErrno() == EINTR { continue }
                throw TLSSetupError(file: path, "cannot be read: \(SystemError(call: "read", errno: lastErrno()).reason)")
            }
            length += n
        }
        guard length > 0 else { throw TLSSetupError(file: path, "is empty") }
        guard length < capacity else { throw TLSSetupError(file: path, "changed size while being read") }
        return try body(UnsafeRawBufferPointer(start: buffer, count: length))
    }
}

/// OpenSSL reports errors on a per-thread queue. Every TLS call in the engine starts from an
/// empty queue (SSL_get_error reads it) and every failure path drains it.
enum TLSErrorQueue {
    @inline(__always) static func clear() { ERR_clear_error() }

    /// Removes every queued error and returns the first one's reason ("certificate verify
    /// failed", "unsupported protocol"…). Reason strings carry no data.
    @discardableResult
    static func drain() -> String? {
        let first = ERR_get_error()
        ERR_clear_error()
        guard first != 0 else { return nil }
        if let text = ERR_reason_error_string(first) { return String(cString: text) }
        return "OpenSSL error \(first)"
    }
}

/// Checks of certificate files that other modules hand to another TLS stack (libcurl's CA
/// file for the IdPs): read and parsed here at start-up and by `check`, so a wrong file is named
/// where it is configured rather than as `curl 77` at the first sign-in.
public enum CertificateFile {
    /// nil when `path` is a readable PEM file with at least one certificate; else the problem.
    public static func problem(_ path: String) -> TLSSetupError? {
        do throws(TLSSetupError) {
            for c in try PEMFile.certificates(path) { X509_free(c) }
            return nil
        } catch {
            return error
        }
    }
}
