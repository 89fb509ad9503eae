// nghttp3 (libnghttp3-dev) for HTTP/3 to clients: QPACK, HTTP/3 framing and stream states
// (Sources/ProxyCore/HTTP3/). QUIC itself is ngtcp2's; the event loop is ours.
// No wrappers are needed: the API is plain C. Any wrapper added here must be `static inline`,
// prefixed `CNghttp3_`, with a one-line reason.
#ifndef CNGHTTP3_SHIM_H
#define CNGHTTP3_SHIM_H
#include <nghttp3/nghttp3.h>
#endif
