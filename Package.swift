// swift-tools-version:6.0
import PackageDescription
import Foundation

// No outside Swift packages: the toolchain's own modules plus C libraries from Debian,
// wrapped as thin system-library or C shim targets (see Sources/C*/).
let package = Package(
    name: "CallbackProxy",
    // NativeSignIn on Apple platforms: CryptoKit, ASWebAuthenticationPresentationContextProviding
    // and Swift concurrency need iOS 13 / macOS 10.15 (the https callback, iOS 17.4, is behind #available).
    platforms: [.iOS(.v13), .macOS(.v10_15)],
    products: [
        .executable(name: "callback-proxy", targets: ["CallbackProxy"]),
        .library(name: "ProxyCore", targets: ["ProxyCore"]),
        .library(name: "NativeSignIn", targets: ["NativeSignIn"]),
        // A test peer, not shipped: the e2e suite's wrapper app asks NativeSignIn through it.
        .executable(name: "native-sign-in-sim", targets: ["NativeSignInSim"]),
    ],
    targets: [
        // Linux syscalls Glibc does not export to Swift (epoll, eventfd, accept4, signalfd).
        // DWARF 4 for the C helpers: valgrind 3.19 (Debian 12's, bench/instructions) cannot read
        // clang's DWARF 5 location lists in UDP.c and gives up on the whole binary.
        .target(name: "CProxyLinux", path: "Sources/CProxyLinux", cSettings: [.unsafeFlags(["-gdwarf-4"])]),
        // The commit the binary was built from (scripts/build writes it; see CBuildInfo.c).
        .target(name: "CBuildInfo", path: "Sources/CBuildInfo"),
        // OpenSSL 3 (libssl-dev): hashes, MAC, AES-GCM, RSA/ECDSA verification, TLS.
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        // libcurl (libcurl4-openssl-dev): the outbound HTTPS client for identity-provider calls.
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        // libyaml (libyaml-dev): the configuration file (YAML, and JSON as its subset).
        .systemLibrary(name: "CYAML", path: "Sources/CYAML", pkgConfig: "yaml-0.1",
                       providers: [.apt(["libyaml-dev"])]),
        // zlib (zlib1g-dev): gzip response compression; raw deflate for large session cookies.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),
        // hiredis (libhiredis-dev): the Redis store's reply parser (the connection itself is ours).
        // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM drops with a warning
        // on every build; <hiredis/hiredis.h> is found on the default include path as it is.
        .systemLibrary(name: "CHiredis", path: "Sources/CHiredis", providers: [.apt(["libhiredis-dev"])]),
        // nghttp2 (libnghttp2-dev): HTTP/2 to clients — framing, HPACK, flow control, flood limits.
        .systemLibrary(name: "CNghttp2", path: "Sources/CNghttp2", pkgConfig: "libnghttp2",
                       providers: [.apt(["libnghttp2-dev"])]),
        // nghttp3 (libnghttp3-dev): HTTP/3 to clients — QPACK, HTTP/3 framing and stream states.
        .systemLibrary(name: "CNghttp3", path: "Sources/CNghttp3", pkgConfig: "libnghttp3",
                       providers: [.apt(["libnghttp3-dev"])]),
        // ngtcp2 (libngtcp2-dev) with its GnuTLS crypto helper (libngtcp2-crypto-gnutls-dev):
        // QUIC to clients. No pkgConfig: the .pc files add nothing the default paths lack.
        .systemLibrary(name: "CNgtcp2", path: "Sources/CNgtcp2",
                       providers: [.apt(["libngtcp2-dev", "libngtcp2-crypto-gnutls-dev", "libgnutls28-dev"])]),
        // Brotli (libbrotli-dev): response compression (`br`); its decoder for the tests.
        // No pkgConfig: the libraries are on the default paths, and one module names both.
        .systemLibrary(name: "CBrotli", path: "Sources/CBrotli", providers: [.apt(["libbrotli-dev"])]),
        // The engine: event loops, HTTP/1.1 codec, HTTP/2 (nghttp2), TLS (OpenSSL), proxying. Knows nothing of OAuth.
        // Dynamic exclusivity checks cost ~30% of the instructions per proxied request
        // (measured with bench/instructions); the engine's state is confined to one loop
        // thread and the compile-time checks still apply.
        .target(name: "ProxyCore", dependencies: ["CProxyLinux", "COpenSSL", "CNghttp2", "CNgtcp2", "CNghttp3", "CZlib", "CBrotli"],
                swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"])]),
        // The domain: the /_oauth_callback contract, JOSE, providers, stores.
        .target(name: "OAuthCallback", dependencies: ["ProxyCore", "COpenSSL", "CCurl", "CZlib", "CHiredis"]),
        // The configuration file: reading, validation (every problem at once), secrets.
        .target(name: "ProxyConfiguration", dependencies: ["ProxyCore", "OAuthCallback", "CYAML"]),
        // The wrapper app's half: recognise the provider navigation, build the native request
        // (allowlist, PKCE), build /_oauth_callback. Foundation only, so that an iOS app can
        // take it; OpenSSL only on Linux, for SHA-256 where CryptoKit does not exist.
        .target(name: "NativeSignIn",
                dependencies: [.target(name: "COpenSSL", condition: .when(platforms: [.linux]))]),
        // The e2e suite's wrapper app speaks JSON lines to NativeSignIn through it (IntegrationTests/e2e/wrapper.py).
        .executableTarget(name: "NativeSignInSim", dependencies: ["NativeSignIn"]),
        .executableTarget(name: "CallbackProxy", dependencies: ["ProxyCore", "OAuthCallback", "ProxyConfiguration", "CProxyLinux",
                                                               "CBuildInfo"]),
        .testTarget(name: "ProxyCoreTests", dependencies: ["ProxyCore", "CZlib", "CBrotli", "CNghttp3", "FuzzTargets"]),
        .testTarget(name: "OAuthCallbackTests", dependencies: ["OAuthCallback"], exclude: ["Fixtures"]),
        .testTarget(name: "ProxyConfigurationTests", dependencies: ["ProxyConfiguration"]),
        .testTarget(name: "NativeSignInTests", dependencies: ["NativeSignIn"]),
        // Every parser that reads untrusted bytes, as fuzz targets (the Fuzz product below drives
        // them; FuzzCorpusTests replays fuzz/corpus through them on every test run).
        .target(name: "FuzzTargets", dependencies: ["ProxyCore", "OAuthCallback", "CNghttp2", "CNghttp3"]),
        .testTarget(name: "FuzzCorpusTests", dependencies: ["FuzzTargets"]),
    ],
    swiftLanguageModes: [.v6]
)

// Fuzzing (scripts/fuzz): the libFuzzer driver, built only when asked — it needs
// -sanitize=fuzzer, which an ordinary build must not link.
if ProcessInfo.processInfo.environment["CALLBACK_PROXY_FUZZ"] != nil {
    package.products.append(.executable(name: "Fuzz", targets: ["Fuzz"]))
    package.targets.append(.executableTarget(name: "Fuzz", dependencies: ["FuzzTargets"],
                                             swiftSettings: [.unsafeFlags(["-parse-as-library"])]))
}
