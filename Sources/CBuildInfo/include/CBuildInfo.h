// What the binary was built from, for `callback-proxy --version` and the build_info metric.
#ifndef CBUILDINFO_H
#define CBUILDINFO_H

// The commit (12 hex digits, "-dirty" when the tree had changes), or "unknown" for a build
// that did not go through scripts/build.
const char *CBuildInfo_commit(void);

#endif
