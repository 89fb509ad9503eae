// swift-tools-version:6.0
import PackageDescription

// No outside Swift packages: the toolchain's own modules plus C libraries from Debian,
// wrapped as thin system-library or C shim targets (see Sources/C*/).
let package = Package(
    name: "CallbackProxy",
    products: [
        .executable(name: "callback-proxy", targets: ["CallbackProxy"]),
        .library(name: "ProxyCore", targets: ["ProxyCore"]),
    ],
    targets: [
        // Linux syscalls Glibc does not export to Swift (epoll, eventfd, accept4, signalfd).
        .target(name: "CProxyLinux", path: "Sources/CProxyLinux"),
        // OpenSSL 3 (libssl-dev): hashes, MAC, AES-GCM, RSA/ECDSA verification, TLS.
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        // The engine: event loops, HTTP/1.1 codec, proxying. Knows nothing of OAuth.
        .target(name: "ProxyCore", dependencies: ["CProxyLinux"]),
        // The domain: the /_oauth_callback contract, JOSE, providers, stores.
        .target(name: "OAuthCallback", dependencies: ["ProxyCore", "COpenSSL"]),
        .executableTarget(name: "CallbackProxy", dependencies: ["ProxyCore", "CProxyLinux"]),
        .testTarget(name: "ProxyCoreTests", dependencies: ["ProxyCore"]),
        .testTarget(name: "OAuthCallbackTests", dependencies: ["OAuthCallback"]),
    ],
    swiftLanguageModes: [.v6]
)
