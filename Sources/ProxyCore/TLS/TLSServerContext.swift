import COpenSSL
import Synchronization

/// One loaded generation of a TLS listener's certificates: an `SSL_CTX` for the default
/// certificate and one per SNI entry, all configured alike. Immutable once built; a reload
/// builds a new one. Handshakes started from it keep it alive (the SNI callback points to it).
///
/// `@unchecked Sendable`: the contexts are fully configured before the object is shared, and
/// OpenSSL allows `SSL_new` on one `SSL_CTX` from several threads at once.
final class TLSServerContext: @unchecked Sendable {
    /// SSL_CTX of the default certificate; new connections start here.
    let defaultContext: OpaquePointer
    /// SSL_CTXs of the SNI entries, in configuration order.
    private let named: [OpaquePointer]
    /// Server name → index in `named`.
    private let names: SNINames
    /// The default certificate's subject and expiry, for the operator log.
    let summary: (subject: String, notAfter: String)
    /// `tls.session_ticket_keys`, installed on every context (nil: OpenSSL's random key per context).
    private let ticketKeys: TLSSessionTicketKeys?
    /// `tls.ocsp_stapling`: one per certificate (the default first, then the SNI ones), each
    /// installed on its context; empty when stapling is off.
    let staples: [OCSPStaple]

    /// The TLS 1.2 cipher suites: ECDHE key exchange and AEAD ciphers only (Mozilla's
    /// "intermediate" list without DHE). TLS 1.3 keeps OpenSSL's defaults, all AEAD.
    static let tls12Ciphers = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    private init(defaultContext: OpaquePointer, named: [OpaquePointer], names: SNINames,
                 summary: (String, String), ticketKeys: TLSSessionTicketKeys?, staples: [OCSPStaple]) {
        self.ticketKeys = ticketKeys
        self.staples = staples
        self.defaultContext = defaultContext
        self.named = named
        self.names = names
        self.summary = summary
    }

    deinit {
        SSL_CTX_free(defaultContext)
        for ctx in named { SSL_CTX_free(ctx) }
    }

    /// Reads every file named in `settings` (once) and builds the contexts. Throws the first
    /// problem, naming its file.
    static func load(_ settings: TLSServerSettings) throws(TLSSetupError) -> TLSServerContext {
        let ticketKeys = settings.sessionTicketKeyFiles.isEmpty ? nil : try TLSSessionTicketKeys.load(settings.sessionTicketKeyFiles)
        let (defaultContext, summary, defaultStaple) = try makeContext(settings, certFile: settings.certFile, keyFile: settings.keyFile)
        var staples = defaultStaple.map { [$0] } ?? []
        var named: [OpaquePointer] = []
        do throws(TLSSetupError) {
            for entry in settings.sni {
                let (ctx, _, staple) = try makeContext(settings, certFile: entry.certFile, keyFile: entry.keyFile)
                named.append(ctx)
                if let staple { staples.append(staple) }
            }
        } catch {
            SSL_CTX_free(defaultContext)
            for ctx in named { SSL_CTX_free(ctx) }
            throw error
        }
        let server = TLSServerContext(defaultContext: defaultContext, named: named, names: SNINames(settings.sni), summary: summary,
                                      ticketKeys: ticketKeys, staples: staples)
        if let ticketKeys {
            // OpenSSL asks the context a handshake started from (its session context), whatever
            // SNI switched to; every context gets the keys all the same.
            ticketKeys.install(on: defaultContext)
            for ctx in named { ticketKeys.install(on: ctx) }
        }
        if !named.isEmpty {
            // Only the context a handshake starts from runs the servername callback.
            let arg = Unmanaged.passUnretained(server).toOpaque()
            _ = COpenSSL_SSL_CTX_set_servername_callback(defaultContext, { ssl, _, arg in
                guard let ssl, let arg else { return SSL_TLSEXT_ERR_OK }
                Unmanaged<TLSServerContext>.fromOpaque(arg).takeUnretainedValue().selectCertificate(ssl)
                return SSL_TLSEXT_ERR_OK
            }, arg)
        }
        return server
    }

    /// An unchanged certificate (the same bytes) keeps its stapled response until the next
    /// refresh; a changed one starts without.
    func adoptStaples(from old: TLSServerContext) {
        for staple in staples { for previous in old.staples { staple.adopt(previous) } }
    }

    /// A server-side session on `fd`, or nil when OpenSSL cannot allocate one.
    func makeSession(fd: Int32) -> TLSSession? {
        guard let ssl = SSL_new(defaultContext) else { TLSErrorQueue.clear(); return nil }
        guard SSL_set_fd(ssl, fd) == 1 else {
            TLSErrorQueue.clear()
            SSL_free(ssl)
            return nil
        }
        SSL_set_accept_state(ssl)
        // One read(2) a record or more instead of two (header, then body); `Transport`
        // drains what this leaves in OpenSSL. Client sessions (upstreams) do not read ahead.
        SSL_set_read_ahead(ssl, 1)
        return TLSSession(ssl: ssl)
    }

    /// SNI: switches the handshake to the certificate configured for the client's name. An
    /// unknown name or none at all gets the default certificate.
    private func selectCertificate(_ ssl: OpaquePointer) {
        guard let raw = SSL_get_servername(ssl, Int32(TLSEXT_NAMETYPE_host_name)) else { return }
        if let index = names.index(for: String(cString: raw)) { SSL_set_SSL_CTX(ssl, named[index]) }
    }

    private static func makeContext(_ settings: TLSServerSettings, certFile: String, keyFile: String)
        throws(TLSSetupError) -> (OpaquePointer, (String, String), OCSPStaple?) {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else {
            throw TLSSetupError(file: nil, "cannot create a TLS context: \(TLSErrorQueue.drain() ?? "out of memory")")
        }
        do throws(TLSSetupError) {
            try configure(ctx, minVersion: settings.minVersion)
            let (summary, staple) = try useCertificate(ctx, certFile: certFile, keyFile: keyFile, stapling: settings.ocspStapling)
            try setSessionIDContext(ctx, certFile: certFile)
            staple?.install(on: ctx)
            // ALPN: h2 when the client offers it and the listener allows it (the server's
            // preference, RFC 7301 §3.2: every client that offers h2 prefers it anyway), else
            // http/1.1. A client that offers neither is served HTTP/1.1 without ALPN rather than
            // refused. The callback's argument says whether h2 may be chosen (non-nil = yes).
            SSL_CTX_set_alpn_select_cb(ctx, { _, out, outLength, offered, offeredLength, allowH2 in
                guard let out, let outLength, let offered else { return SSL_TLSEXT_ERR_NOACK }
                var http11: UnsafePointer<UInt8>? = nil
                var i = 0
                let count = Int(offeredLength)
                while i < count {
                    let length = Int(offered[i])
                    guard i + 1 + length <= count else { break }
                    if allowH2 != nil && length == 2 && offered[i + 1] == 0x68 && offered[i + 2] == 0x32 {
                        out.pointee = offered + i + 1
                        outLength.pointee = 2
                        return SSL_TLSEXT_ERR_OK
                    }
                    if length == 8 && memcmp(offered + i + 1, "http/1.1", 8) == 0 { http11 = offered + i + 1 }
                    i += 1 + length
                }
                guard let http11 else { return SSL_TLSEXT_ERR_NOACK }
                out.pointee = http11
                outLength.pointee = 8
                return SSL_TLSEXT_ERR_OK
            }, settings.http2 ? UnsafeMutableRawPointer(bitPattern: 1) : nil)
            return (ctx, summary, staple)
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
    }

    /// The session id context nginx gives a `server` block with one certificate and no client
    /// certificates: SHA-1 of "HTTP" and the certificate's SHA-1 (`ngx_ssl_session_id_context`).
    /// OpenSSL resumes a session only in the context it was made in, so this is what lets a
    /// ticket made by nginx with the same `tls.session_ticket_keys` resume here and back while
    /// a fleet migrates. A new certificate is a new context (a renewal starts new sessions, as
    /// with nginx). SHA-1 because nginx uses it: the digest names a context, it protects nothing.
    private static func setSessionIDContext(_ ctx: OpaquePointer, certFile: String) throws(TLSSetupError) {
        var certificate = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var context = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard let sha1, let leaf = SSL_CTX_get0_certificate(ctx), X509_digest(leaf, sha1, &certificate, &length) == 1 else {
            throw TLSSetupError(file: certFile, "cannot digest the certificate: \(TLSErrorQueue.drain() ?? "unknown error")")
        }
        let input = Array("HTTP".utf8) + certificate.prefix(Int(length))
        guard EVP_Digest(input, input.count, &context, &length, sha1, nil) == 1,
              SSL_CTX_set_session_id_context(ctx, context, length) == 1 else {
            throw TLSSetupError(file: certFile, "cannot set the session id context: \(TLSErrorQueue.drain() ?? "unknown error")")
        }
    }

    nonisolated(unsafe) private static let sha1: OpaquePointer? = EVP_MD_fetch(nil, "SHA1", nil)

    /// Protocol versions, ciphers and modes shared by server and client contexts.
    static func configure(_ ctx: OpaquePointer, minVersion: TLSVersion) throws(TLSSetupError) {
        let version = minVersion == .tls13 ? TLS1_3_VERSION : TLS1_2_VERSION
        guard COpenSSL_SSL_CTX_set_min_proto_version(ctx, version) == 1,
              SSL_CTX_set_cipher_list(ctx, tls12Ciphers) == 1 else {
            throw TLSSetupError(file: nil, "cannot configure TLS: \(TLSErrorQueue.drain() ?? "unknown error")")
        }
        // No renegotiation (a DoS vector, and it would make writes wait on reads); no
        // compression (CRIME). A peer that closes without close_notify reads as EOF: HTTP
        // framing, not the TLS alert, decides whether a message was complete.
        SSL_CTX_set_options(ctx, COpenSSL_SSL_OP_NO_RENEGOTIATION | COpenSSL_SSL_OP_NO_COMPRESSION
                            | COpenSSL_SSL_OP_CIPHER_SERVER_PREFERENCE | COpenSSL_SSL_OP_IGNORE_UNEXPECTED_EOF)
        // Partial writes and moving buffers match how connections retry from their output
        // buffers; released buffers keep idle keep-alive connections small (OpenSSL's 2×17 KiB
        // record buffers are returned between reads and writes).
        _ = COpenSSL_SSL_CTX_set_mode(ctx, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS))
        // Resumption by session tickets only (stateless, shared by all loops through the one
        // SSL_CTX); no server-side session cache to grow with every client.
        _ = COpenSSL_SSL_CTX_set_session_cache_mode(ctx, Int(SSL_SESS_CACHE_OFF))
    }

    /// Loads a certificate chain and its key into `ctx` and checks that they belong together.
    /// With `stapling`, also the certificate's `OCSPStaple` (made while the chain is at hand).
    @discardableResult
    static func useCertificate(_ ctx: OpaquePointer, certFile: String, keyFile: String,
                               stapling: Bool = false) throws(TLSSetupError) -> ((String, String), OCSPStaple?) {
        let (leaf, chain) = try PEMFile.certificateChain(certFile)
        defer {
            X509_free(leaf)
            for c in chain { X509_free(c) }
        }
        guard SSL_CTX_use_certificate(ctx, leaf) == 1 else {
            throw TLSSetupError(file: certFile, "certificate refused: \(TLSErrorQueue.drain() ?? "unknown error")")
        }
        for c in chain where COpenSSL_SSL_CTX_add1_chain_cert(ctx, c) != 1 {
            throw TLSSetupError(file: certFile, "chain certificate refused: \(TLSErrorQueue.drain() ?? "unknown error")")
        }
        let key = try PEMFile.privateKey(keyFile)
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_PrivateKey(ctx, key) == 1, SSL_CTX_check_private_key(ctx) == 1 else {
            TLSErrorQueue.clear()
            throw TLSSetupError(file: keyFile, "does not match the certificate in '\(certFile)'")
        }
        return (describe(leaf), stapling ? OCSPStaple(leaf: leaf, chain: chain) : nil)
    }

    /// Subject and expiry of a certificate ("/CN=example.com", "Jan  1 00:00:00 2027 GMT").
    static func describe(_ cert: OpaquePointer) -> (String, String) {
        var subject = "?"
        if let line = X509_NAME_oneline(X509_get_subject_name(cert), nil, 0) {
            subject = String(cString: line)
            COpenSSL_free(line)
        }
        var notAfter = "?"
        if let bio = BIO_new(BIO_s_mem()) {
            if ASN1_TIME_print(bio, X509_get0_notAfter(cert)) == 1 {
                var buffer = [CChar](repeating: 0, count: 64)
                let n = BIO_read(bio, &buffer, Int32(buffer.count - 1))
                if n > 0 { notAfter = String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
            }
            BIO_free(bio)
        }
        TLSErrorQueue.clear()
        return (subject, notAfter)
    }
}

/// A TLS listener's certificates, reloadable while it runs: `reload()` (SIGHUP) re-reads the
/// files and swaps in a new generation for new handshakes; connections already established
/// keep theirs. A reload that fails changes nothing.
public final class TLSCredentials: Sendable {
    public let settings: TLSServerSettings
    private let current: Mutex<TLSServerContext>
    /// Bumped by every successful `reload`: what holds a copy of the certificate in another
    /// library (QUIC's GnuTLS credentials, `QUICCertificate`) loads it again when it changes.
    private let reloads = Atomic<Int>(0)

    /// Loads the files (each read once). Throws the first problem, naming its file.
    /// `previous`: the credentials a reload replaces (whatever settings changed): a certificate
    /// they also serve keeps its stapled response, so a responder that is down at that moment
    /// costs no staple.
    public init(_ settings: TLSServerSettings, keeping previous: TLSCredentials? = nil) throws(TLSSetupError) {
        self.settings = settings
        let fresh = try TLSServerContext.load(settings)
        if let previous { fresh.adoptStaples(from: previous.context) }
        current = Mutex(fresh)
    }

    /// Re-reads every file; on success new handshakes use the new certificates. On failure
    /// the previous ones stay in use and the error names the file at fault.
    public func reload() throws(TLSSetupError) {
        let fresh = try TLSServerContext.load(settings)
        current.withLock { old in
            fresh.adoptStaples(from: old)
            old = fresh
        }
        reloads.add(1, ordering: .releasing)
    }

    /// How many times the files were loaded again (`reload`).
    var generation: Int { reloads.load(ordering: .acquiring) }

    /// The default certificate's subject and expiry, for the operator log.
    public var summary: (subject: String, notAfter: String) { current.withLock { $0.summary } }

    /// The generation new handshakes start from.
    var context: TLSServerContext { current.withLock { $0 } }

    /// `tls.ocsp_stapling`: the current generation's certificates, for the refresher to fetch
    /// their responses (empty when stapling is off).
    public var ocspStaples: [OCSPStaple] { current.withLock { $0.staples } }
}
