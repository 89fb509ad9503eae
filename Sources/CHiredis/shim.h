// hiredis 0.14 (libhiredis-dev) headers for the Redis store: only its transport-free RESP
// reader (redisReaderCreate/Feed/GetReply, freeReplyObject). The socket, TLS and the event
// loop are ours (Sources/OAuthCallback/Store/RedisConnection.swift): hiredis 0.14's own
// connections read and write the socket themselves and have no TLS.
// No wrappers are needed: the reader's functions are plain C and the REDIS_* constants are
// simple integer macros Swift imports as they are.
// Any wrapper added here must be `static inline`, prefixed `CHiredis_`, with a one-line reason.
#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#endif
