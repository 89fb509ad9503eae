import OAuthCallback
import ProxyCore

/// One entry per parser that reads bytes from the network or from a client: what the fuzzer
/// (`scripts/fuzz`, the `Fuzz` product) drives, and what `swift test` replays from
/// `fuzz/corpus/<name>/` so that every input ever found stays fixed (FuzzCorpusTests).
///
/// A target may not crash, trap or hang on any input, and checks what is cheap to check:
/// a head or chunked body parsed whole, byte by byte and in two pieces means the same thing.
public enum FuzzTargets {
    public static let all: [String: @Sendable (UnsafeRawBufferPointer) -> Void] = [
        "request-head": HTTPTargets.requestHead,
        "response-head": HTTPTargets.responseHead,
        "chunked": HTTPTargets.chunked,
        "path": HTTPTargets.path,
        "proxy-protocol": HTTPTargets.proxyProtocol,
        "h2-request": HTTP2Targets.requestHead,
        "h3-request": HTTP3Targets.requestHead,
        "callback-query": OAuthTargets.callbackQuery,
        "json": OAuthTargets.json,
        "jwt": OAuthTargets.jwt,
        "jwks": OAuthTargets.jwks,
        "redirect": OAuthTargets.redirect,
        "redis-reply": OAuthTargets.redisReply,
    ]

    /// Stops the run at a broken invariant, naming it (libFuzzer saves the input).
    static func require(_ condition: Bool, _ what: @autoclosure () -> String) {
        if !condition { fatalError("fuzz invariant broken: \(what())") }
    }
}
