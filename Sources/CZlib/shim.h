// zlib headers plus wrappers for what Swift cannot import. Every symbol is prefixed CZlib_.
#ifndef CZLIB_SHIM_H
#define CZLIB_SHIM_H
#include <zlib.h>

// deflateInit2 is a function-like macro (it passes ZLIB_VERSION and sizeof(z_stream)).
static inline int CZlib_deflateInit2(z_streamp stream, int level, int method, int windowBits,
                                     int memLevel, int strategy) {
    return deflateInit2(stream, level, method, windowBits, memLevel, strategy);
}

// inflateInit2 is a function-like macro (it passes ZLIB_VERSION and sizeof(z_stream)).
static inline int CZlib_inflateInit2(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}

#endif
