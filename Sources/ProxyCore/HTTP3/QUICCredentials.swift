import CNgtcp2

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
