// nghttp3 (libnghttp3-dev) for HTTP/3 to clients: QPACK, HTTP/3 framing and stream states
// (Sources/ProxyCore/HTTP3/). QUIC itself is ngtcp2's; the event loop is ours.
// No wrappers are needed: the API is plain C. Any wrapper added here must be `static inline`,
// prefixed `CNghttp3_`, with a one-line reason.
#ifndef CNGHTTP3_SHIM_H
#define CNGHTTP3_SHIM_H
#include <nghttp3/nghttp3.h>

static inline void CNghttp3_settings_default(nghttp3_settings *s) { nghttp3_settings_default(s); }
static inline int CNghttp3_conn_server_new(nghttp3_conn **pconn, const nghttp3_callbacks *callbacks,
                                           const nghttp3_settings *settings, void *user_data) {
    return nghttp3_conn_server_new(pconn, callbacks, settings, NULL, user_data);
}
#endif
