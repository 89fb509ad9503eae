import COpenSSL

/// The client side of `https://` upstreams (and of a `rediss://` store): one `SSL_CTX` shared
/// by every loop, with peer verification always on (system store, or the configured CA file),
/// hostname or IP checks on every connection, SNI, and an optional client certificate.
///
/// `@unchecked Sendable`: configured completely before it is shared; OpenSSL allows `SSL_new`
/// on one `SSL_CTX` from several threads.
public final class UpstreamTLSClient: @unchecked Sendable {
    let context: OpaquePointer
    /// Checked against the certificate (DNS name, or an IP address against IP SANs).
    public let serverName: String
    private let nameIsIP: Bool
    /// Where trust comes from, for the log ("system store" or the CA file).
    public let trustSource: String

    /// `host` is the upstream URL's host, used when `settings.serverName` is not set. `alpn`
    /// is the protocol offered (nil: none, for a server that speaks no ALPN protocol, as Redis).
    public init(_ settings: UpstreamTLSSettings, host: String, alpn: String? = "http/1.1") throws(TLSSetupError) {
        serverName = settings.serverName ?? host
        nameIsIP = HostSyntax.isIPAddress(serverName)
        guard let ctx = SSL_CTX_new(TLS_client_method()) else {
            throw TLSSetupError(file: nil, "cannot create a TLS context: \(TLSErrorQueue.drain() ?? "out of memory")")
        }
        do throws(TLSSetupError) {
            try TLSServerContext.configure(ctx, minVersion: .tls12)
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
            if let caFile = settings.caFile {
                let certs = try PEMFile.certificates(caFile)
                defer { for c in certs { X509_free(c) } }
                let store = SSL_CTX_get_cert_store(ctx)
                for c in certs where X509_STORE_add_cert(store, c) != 1 {
                    throw TLSSetupError(file: caFile, "CA certificate refused: \(TLSErrorQueue.drain() ?? "unknown error")")
                }
                trustSource = caFile
            } else {
                guard SSL_CTX_set_default_verify_paths(ctx) == 1 else {
                    throw TLSSetupError(file: nil, "cannot load the system CA store: \(TLSErrorQueue.drain() ?? "unknown error")")
                }
                trustSource = "system store"
            }
            switch (settings.clientCertFile, settings.clientKeyFile) {
            case (let cert?, let key?):
                try TLSServerContext.useCertificate(ctx, certFile: cert, keyFile: key)
            case (nil, nil):
                break
            default:
                throw TLSSetupError(file: nil, "a client certificate needs both its certificate and its key file")
            }
            if let alpn {
                // Length-prefixed protocol list; 0 means success here, unlike most of OpenSSL.
                let list: [UInt8] = [UInt8(alpn.utf8.count)] + Array(alpn.utf8)
                guard SSL_CTX_set_alpn_protos(ctx, list, UInt32(list.count)) == 0 else {
                    throw TLSSetupError(file: nil, "cannot configure ALPN: \(TLSErrorQueue.drain() ?? "unknown error")")
                }
            }
        } catch {
            SSL_CTX_free(ctx)
            throw error
        }
        context = ctx
    }

    deinit { SSL_CTX_free(context) }

    /// A client session on the connected socket `fd`, set up to verify the upstream's name, or
    /// `serverName` instead when the peer is only known at run time (a Redis master announced
    /// by Sentinel); the context, its trust and client certificate are the same.
    func makeSession(fd: Int32, serverName override: String? = nil) -> TLSSession? {
        let serverName = override ?? self.serverName
        let nameIsIP = override.map { HostSyntax.isIPAddress($0) } ?? self.nameIsIP
        guard let ssl = SSL_new(context) else { TLSErrorQueue.clear(); return nil }
        let session = TLSSession(ssl: ssl)
        guard SSL_set_fd(ssl, fd) == 1 else { TLSErrorQueue.clear(); return nil }
        SSL_set_connect_state(ssl)
        if nameIsIP {
            // SNI carries DNS names only (RFC 6066 §3); an address is checked against IP SANs.
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1 else { TLSErrorQueue.clear(); return nil }
        } else {
            guard COpenSSL_SSL_set_tlsext_host_name(ssl, serverName) == 1 else { TLSErrorQueue.clear(); return nil }
            SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            guard SSL_set1_host(ssl, serverName) == 1 else { TLSErrorQueue.clear(); return nil }
        }
        return session
    }
}
