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

static inline size_t CNgtcp2_max_retry_tokenlen(void) { return NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN; }
static inline size_t CNgtcp2_max_regular_tokenlen(void) { return NGTCP2_CRYPTO_MAX_REGULAR_TOKENLEN; }
#endif
