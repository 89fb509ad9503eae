// SwiftPM has no way to pass a string into a build (conditional-compilation flags are names,
// and a -Xcc define would change every module's importer flags and rebuild everything). So
// scripts/build writes the commit into .build/build-info.h and touches this file: only this
// one C file recompiles, and the release objects the tests ran are the ones packaged.
#include "CBuildInfo.h"

#if __has_include("../../.build/build-info.h")
#include "../../.build/build-info.h"
#endif

#ifndef CALLBACK_PROXY_COMMIT
#define CALLBACK_PROXY_COMMIT "unknown"
#endif

const char *CBuildInfo_commit(void) { return CALLBACK_PROXY_COMMIT; }
