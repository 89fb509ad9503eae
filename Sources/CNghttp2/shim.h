// nghttp2 (libnghttp2-dev) for HTTP/2 to clients: framing, HPACK, flow control, stream
// states and its flood mitigations (Sources/ProxyCore/HTTP2/). The socket, TLS and the event
// loop are ours: the session is driven with nghttp2_session_mem_recv / mem_send.
// No wrappers are needed: the API is plain C, its constants are enums Swift imports as they are.
// Any wrapper added here must be `static inline`, prefixed `CNghttp2_`, with a one-line reason.
#ifndef CNGHTTP2_SHIM_H
#define CNGHTTP2_SHIM_H
#include <nghttp2/nghttp2.h>
#endif
