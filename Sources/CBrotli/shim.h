// Brotli (libbrotli-dev): the encoder for response compression, and the decoder the tests use
// to check its output (decoding is a few KiB of library; one module keeps them together).
#ifndef CBROTLI_SHIM_H
#define CBROTLI_SHIM_H
#include <brotli/encode.h>
#include <brotli/decode.h>
#endif
