import CNgtcp2
import Synchronization

/// The certificate and key a TLS listener's QUIC handshakes present, loaded by GnuTLS from the
/// same files OpenSSL loaded for TCP (`tls.cert`, `tls.key`), once per configuration.
final class QUICCredentials: @unchecked Sendable {
    // Read-only once loaded; GnuTLS allows one credentials object to serve sessions on many threads.
    let credentials: gnutls_certificate_credentials_t

    init?(certFile: String, keyFile: String) {
        var c: gnutls_certificate_credentials_t?
        guard gnutls_certificate_allocate_credentials(&c) == 0, let c else { return nil }
        guard gnutls_certificate_set_x509_key_file(c, certFile, keyFile, GNUTLS_X509_FMT_PEM) >= 0 else {
            gnutls_certificate_free_credentials(c)
            return nil
        }
        credentials = c
    }

    deinit { gnutls_certificate_free_credentials(credentials) }
}

/// A TLS listener's certificate for QUIC, following the TCP side's reloads: a SIGHUP that re-reads
/// the certificate files (`TLSCredentials.reload`) bumps its generation, and the next new QUIC
/// connection loads the files into fresh GnuTLS credentials. Connections keep the credentials they
/// started with (each holds them). If GnuTLS cannot load the new files the previous ones stay.
final class QUICCertificate: Sendable {
    private let tls: TLSCredentials
    private let log: Logger
    private let current: Mutex<(generation: Int, credentials: QUICCredentials?)>

    init(tls: TLSCredentials, log: Logger) {
        self.tls = tls
        self.log = log
        let generation = tls.generation
        let loaded = QUICCredentials(certFile: tls.settings.certFile, keyFile: tls.settings.keyFile)
        if loaded == nil {
            log.error("HTTP/3: GnuTLS cannot load the certificate and key; no QUIC connection is accepted", [
                "cert": tls.settings.certFile, "setting": "tls.cert, tls.key (or http3.enabled: false)",
            ])
        }
        current = Mutex((generation, loaded))
    }

    /// The credentials a new connection presents (nil: none loadable).
    var credentials: QUICCredentials? {
        let generation = tls.generation
        return current.withLock { c -> QUICCredentials? in
            guard c.generation != generation else { return c.credentials }
            c.generation = generation
            if let fresh = QUICCredentials(certFile: tls.settings.certFile, keyFile: tls.settings.keyFile) {
                c.credentials = fresh
            } else {
                log.error("HTTP/3: GnuTLS cannot load the reloaded certificate; QUIC keeps the previous one", [
                    "cert": tls.settings.certFile, "setting": "tls.cert, tls.key",
                ])
            }
            return c.credentials
        }
    }
}
