// hiredis 0.14 (libhiredis-dev) headers for the Redis store: the async API, driven by the
// proxy's event loops through a Swift adapter (Sources/OAuthCallback/Store/RedisConnection.swift).
// No wrappers are needed: the store sends commands with redisAsyncCommandArgv (explicit
// lengths, binary-safe, not variadic), the reply/event/connect callbacks are plain C function
// pointers, and the REDIS_* constants are simple integer macros Swift imports as they are.
// Any wrapper added here must be `static inline`, prefixed `CHiredis_`, with a one-line reason.
#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#endif
