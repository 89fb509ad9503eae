// OpenSSL 3 headers plus typed wrappers for what Swift cannot import:
// function-like macros and composite constants. Every symbol is prefixed COpenSSL_.
#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/kdf.h>
#include <openssl/ocsp.h>
#include <string.h>

// OPENSSL_free is a macro.
static inline void COpenSSL_free(void *p) { OPENSSL_free(p); }

// EVP_PKEY_PUBLIC_KEY / EVP_PKEY_KEYPAIR are composite macros (OR of other macros).
static const int COpenSSL_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;
static const int COpenSSL_EVP_PKEY_KEYPAIR = EVP_PKEY_KEYPAIR;

// OSSL_PARAM and OSSL_PARAM_BLD keep the *key name pointer* until the params are consumed;
// Swift imports these string macros as String, whose C pointer is a temporary. These return
// pointers to the literals' static storage instead.
static inline const char *COpenSSL_PARAM_RSA_N(void) { return OSSL_PKEY_PARAM_RSA_N; }
static inline const char *COpenSSL_PARAM_RSA_E(void) { return OSSL_PKEY_PARAM_RSA_E; }
static inline const char *COpenSSL_PARAM_GROUP_NAME(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
static inline const char *COpenSSL_PARAM_PUB_KEY(void) { return OSSL_PKEY_PARAM_PUB_KEY; }

// Sets the digest of an EVP_MAC_CTX (HMAC): building an OSSL_PARAM array from Swift would
// need the key and value C strings to outlive the array; here both are static literals or
// the caller's string, alive for the whole call.
static inline int COpenSSL_EVP_MAC_CTX_set_digest(EVP_MAC_CTX *ctx, const char *digest) {
    OSSL_PARAM params[2];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)digest, 0);
    params[1] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(ctx, params);
}

// Keys an HMAC-SHA256 EVP_MAC_CTX (session ticket keys): the OSSL_PARAM array must point at
// the key and the digest name for the whole call, which a Swift-built array cannot promise.
static inline int COpenSSL_EVP_MAC_CTX_init_hmac_sha256(EVP_MAC_CTX *ctx, const unsigned char *key, size_t length) {
    OSSL_PARAM params[3];
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)key, length);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(ctx, params);
}

// EVP_PKEY_Q_keygen is variadic: one typed wrapper per key kind.
static inline EVP_PKEY *COpenSSL_EVP_PKEY_Q_keygen_RSA(size_t bits) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", bits);
}
static inline EVP_PKEY *COpenSSL_EVP_PKEY_Q_keygen_EC(const char *curve) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve);
}

// --- TLS (ProxyCore's listeners and HTTPS upstreams) ---

// SSL_OP_* are composite macros (SSL_OP_BIT(n)) that Swift cannot import.
static const uint64_t COpenSSL_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const uint64_t COpenSSL_SSL_OP_IGNORE_UNEXPECTED_EOF = SSL_OP_IGNORE_UNEXPECTED_EOF;
static const uint64_t COpenSSL_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
static const uint64_t COpenSSL_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;

// SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl.
static inline int COpenSSL_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
// SSL_CTX_set_mode is a macro over SSL_CTX_ctrl.
static inline long COpenSSL_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
// SSL_CTX_set_session_cache_mode is a macro over SSL_CTX_ctrl.
static inline long COpenSSL_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
// SSL_CTX_add1_chain_cert is a macro over SSL_CTX_ctrl.
static inline int COpenSSL_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return (int)SSL_CTX_add1_chain_cert(ctx, cert);
}
// SSL_CTX_set_tlsext_servername_callback / _arg are macros over SSL_CTX_callback_ctrl / SSL_CTX_ctrl,
// and the callback's type is erased to void (*)(void) there.
static inline int COpenSSL_SSL_CTX_set_servername_callback(SSL_CTX *ctx, int (*cb)(SSL *, int *, void *), void *arg) {
    if (!SSL_CTX_set_tlsext_servername_callback(ctx, cb)) return 0;
    return (int)SSL_CTX_set_tlsext_servername_arg(ctx, arg);
}
// SSL_set_tlsext_host_name is a macro over SSL_ctrl (and casts away const).
static inline int COpenSSL_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
// --- OCSP stapling (tls.ocsp_stapling) ---

// SSL_CTX_set_tlsext_status_cb / _arg are macros over SSL_CTX_callback_ctrl / SSL_CTX_ctrl.
static inline int COpenSSL_SSL_CTX_set_status_callback(SSL_CTX *ctx, int (*cb)(SSL *, void *), void *arg) {
    if (!SSL_CTX_set_tlsext_status_cb(ctx, cb)) return 0;
    return (int)SSL_CTX_set_tlsext_status_arg(ctx, arg);
}
// SSL_set_tlsext_status_ocsp_resp is a macro over SSL_ctrl; OpenSSL takes ownership of `der`
// (allocated with OPENSSL_malloc).
static inline int COpenSSL_SSL_set_ocsp_response(SSL *ssl, unsigned char *der, long length) {
    return (int)SSL_set_tlsext_status_ocsp_resp(ssl, der, length);
}
// SSL_get_tlsext_status_type is a macro over SSL_ctrl.
static inline int COpenSSL_SSL_status_type(SSL *ssl) { return (int)SSL_get_tlsext_status_type(ssl); }
// The certificate's first OCSP responder URL (Authority Information Access) copied into `out`;
// 0 when it has none or it does not fit. X509_get1_ocsp returns a STACK_OF(OPENSSL_STRING),
// whose accessors are macros.
static inline int COpenSSL_first_ocsp_url(X509 *cert, char *out, size_t size) {
    STACK_OF(OPENSSL_STRING) *urls = X509_get1_ocsp(cert);
    int ok = 0;
    if (urls && sk_OPENSSL_STRING_num(urls) > 0) {
        const char *url = sk_OPENSSL_STRING_value(urls, 0);
        if (strlen(url) < size) { strcpy(out, url); ok = 1; }
    }
    X509_email_free(urls);
    return ok;
}
// A STACK_OF(X509) holding `cert` (not owned: free with COpenSSL_sk_X509_free); sk_X509_* are macros.
static inline STACK_OF(X509) *COpenSSL_sk_X509_of(X509 *cert) {
    STACK_OF(X509) *s = sk_X509_new_null();
    if (s && !sk_X509_push(s, cert)) { sk_X509_free(s); return NULL; }
    return s;
}
static inline void COpenSSL_sk_X509_free(STACK_OF(X509) *s) { sk_X509_free(s); }


// One record from what a read-ahead session already holds, never from its socket: the read
// BIO is swapped for an empty one (reads "would block") around one SSL_read_ex, so a record
// whose rest is still in the kernel ends the call instead of reading on. (A socket read could
// bring more records, and a drain of "everything pending" would go on as long as a fast peer
// keeps sending.) The empty BIO is per thread: a BIO's retry flags are written on each read.
// Returns the bytes read (> 0), 0 when no whole record is buffered, -1 at close_notify, -2 on
// a fatal error (the reason stays on the error queue).
static inline long COpenSSL_SSL_read_buffered(SSL *ssl, void *buf, size_t len) {
    static __thread BIO *empty;
    if (!empty) {
        empty = BIO_new(BIO_s_mem());
        if (!empty) return -2;
        BIO_set_mem_eof_return(empty, -1);
    }
    BIO *socket = SSL_get_rbio(ssl);
    BIO_up_ref(socket);  // kept alive across SSL_set0_rbio, which drops the session's reference
    BIO_up_ref(empty);   // the reference SSL_set0_rbio hands to the session
    SSL_set0_rbio(ssl, empty);
    size_t n = 0;
    int r = SSL_read_ex(ssl, buf, len, &n);
    // Classified before the socket BIO is back: SSL_get_error reads the current BIO's flags.
    long result = r == 1 ? (long)n : 0;
    if (r != 1) {
        switch (SSL_get_error(ssl, r)) {
        case SSL_ERROR_WANT_READ: case SSL_ERROR_WANT_WRITE: result = 0; break;
        case SSL_ERROR_ZERO_RETURN: result = -1; break;
        default: result = -2; break;
        }
    }
    SSL_set0_rbio(ssl, socket);  // hands our reference back; drops the session's on `empty`
    return result;
}

#endif
