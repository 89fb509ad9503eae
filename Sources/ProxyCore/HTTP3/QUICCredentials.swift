import CNgtcp2
import Synchronization

/// The certificates a TLS listener's QUIC handshakes present, loaded by GnuTLS from the same
/// files OpenSSL loaded for TCP: `tls.cert`/`tls.key`, and each `tls.sni` entry's, picked by the
/// client's server name exactly as TCP picks them (`SNINames`).
final class QUICCredentials: @unchecked Sendable {
    // Read-only once loaded; GnuTLS allows one credentials object to serve sessions on many threads.
    let credentials: gnutls_certificate_credentials_t
    /// The `tls.sni` entries' credentials, in configuration order.
    private let named: [gnutls_certificate_credentials_t]
    private let names: SNINames

    /// nil, and the file that failed in `failed`, if GnuTLS cannot load one of them.
    init?(_ settings: TLSServerSettings, failed: inout String) {
        var loaded: [gnutls_certificate_credentials_t] = []
        for (cert, key) in [(settings.certFile, settings.keyFile)] + settings.sni.map({ ($0.certFile, $0.keyFile) }) {
            guard let c = Self.load(certFile: cert, keyFile: key) else {
                loaded.forEach { gnutls_certificate_free_credentials($0) }
                failed = cert
                return nil
            }
            loaded.append(c)
        }
        credentials = loaded[0]
        named = Array(loaded.dropFirst())
        names = SNINames(settings.sni)
    }

    private static func load(certFile: String, keyFile: String) -> gnutls_certificate_credentials_t? {
        var c: gnutls_certificate_credentials_t?
        guard gnutls_certificate_allocate_credentials(&c) == 0, let c else { return nil }
        guard gnutls_certificate_set_x509_key_file(c, certFile, keyFile, GNUTLS_X509_FMT_PEM) >= 0 else {
            gnutls_certificate_free_credentials(c)
            return nil
        }
        return c
    }

    deinit {
        gnutls_certificate_free_credentials(credentials)
        named.forEach { gnutls_certificate_free_credentials($0) }
    }

    /// After the ClientHello: the handshake switches to the certificate configured for the
    /// client's server name, if one is (else it keeps the default set at the start).
    func selectCertificate(_ session: gnutls_session_t) {
        guard !named.isEmpty else { return }
        var buffer = [UInt8](repeating: 0, count: 256)
        var size = buffer.count
        var type: UInt32 = 0
        guard gnutls_server_name_get(session, &buffer, &size, &type, 0) == 0, type == GNUTLS_NAME_DNS.rawValue,
              let index = names.index(for: String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self)) else { return }
        _ = gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(named[index]))
    }
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
        var failed = ""
        let loaded = QUICCredentials(tls.settings, failed: &failed)
        if loaded == nil {
            log.error("HTTP/3: GnuTLS cannot load a certificate and key; no QUIC connection is accepted", [
                "cert": failed, "setting": "tls.cert, tls.key, tls.sni (or http3.enabled: false)",
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
            var failed = ""
            if let fresh = QUICCredentials(tls.settings, failed: &failed) {
                c.credentials = fresh
            } else {
                log.error("HTTP/3: GnuTLS cannot load a reloaded certificate; QUIC keeps the previous ones", [
                    "cert": failed, "setting": "tls.cert, tls.key, tls.sni",
                ])
            }
            return c.credentials
        }
    }
}
