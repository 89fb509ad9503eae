// ngtcp2 (libngtcp2-dev) for QUIC to clients, with its GnuTLS crypto helper
// (libngtcp2-crypto-gnutls-dev): OpenSSL 3.0 has no QUIC API, so the QUIC handshake is
// GnuTLS's (TLS 1.3 only) while TCP keeps OpenSSL, on the same certificate and key files.
// The sockets and the event loop are ours (Sources/ProxyCore/HTTP3/).
//
// Function-like macros and macros built from sizeof are not imported by Swift: each wrapper
// below stands for one, as `CNgtcp2_<name>` (ngtcp2's versioned functions, which its macros
// call with the version the headers were built with, will join them as the listener uses them).
#ifndef CNGTCP2_SHIM_H
#define CNGTCP2_SHIM_H
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <gnutls/gnutls.h>

static inline void CNgtcp2_settings_default(ngtcp2_settings *s) { ngtcp2_settings_default(s); }
static inline void CNgtcp2_transport_params_default(ngtcp2_transport_params *p) { ngtcp2_transport_params_default(p); }
static inline int CNgtcp2_conn_server_new(ngtcp2_conn **pconn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
                                          const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
                                          const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
                                          void *user_data) {
    return ngtcp2_conn_server_new(pconn, dcid, scid, path, version, callbacks, settings, params, NULL, user_data);
}
static inline int CNgtcp2_conn_read_pkt(ngtcp2_conn *conn, const ngtcp2_path *path, const ngtcp2_pkt_info *pi,
                                        const uint8_t *pkt, size_t pktlen, ngtcp2_tstamp ts) {
    return ngtcp2_conn_read_pkt(conn, path, pi, pkt, pktlen, ts);
}
static inline ngtcp2_ssize CNgtcp2_conn_writev_stream(ngtcp2_conn *conn, ngtcp2_path *path, ngtcp2_pkt_info *pi,
                                                      uint8_t *dest, size_t destlen, ngtcp2_ssize *pdatalen, uint32_t flags,
                                                      int64_t stream_id, const ngtcp2_vec *datav, size_t datavcnt,
                                                      ngtcp2_tstamp ts) {
    return ngtcp2_conn_writev_stream(conn, path, pi, dest, destlen, pdatalen, flags, stream_id, datav, datavcnt, ts);
}
static inline ngtcp2_ssize CNgtcp2_conn_write_connection_close(ngtcp2_conn *conn, ngtcp2_path *path, ngtcp2_pkt_info *pi,
                                                               uint8_t *dest, size_t destlen,
                                                               const ngtcp2_connection_close_error *ccerr, ngtcp2_tstamp ts) {
    return ngtcp2_conn_write_connection_close(conn, path, pi, dest, destlen, ccerr, ts);
}
static inline size_t CNgtcp2_max_retry_tokenlen(void) { return NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN; }
static inline size_t CNgtcp2_max_regular_tokenlen(void) { return NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN; }
#endif
