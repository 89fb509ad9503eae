import ProxyCore

/// Lets each authorization code through at most once (DESIGN §5), across all loops and — with
/// a shared store — all instances.
///
/// - **Before the exchange**, not after: two arrivals of the same code racing each other must
///   not both reach the IdP; the store's atomic set-if-absent picks exactly one.
/// - **The key is a hash**: `replay:` + hex SHA-256 of `provider ‖ 0x00 ‖ code`. A raw code
///   in the store would be a live credential sitting in Redis (and in its `MONITOR`, its
///   dumps, its logs) for the whole window. The provider is part of the input because codes are
///   only unique per issuer; the NUL separator cannot occur in either part (the provider is a
///   token, the code printable ASCII), so no two pairs share an input.
/// - **A code stays spent** even if its exchange then fails: the IdP may already have
///   consumed it, and a retry with the same code is exactly what a replay looks like. The
///   user starts the sign-in again.
/// - **Fails closed**: if the store cannot say whether the code is new, the sign-in is refused
///   (retryable) rather than risking a second redemption.
public struct ReplayGuard: Sendable {
    public let store: any Store
    /// How long a seen code is remembered; must outlast the IdP's code lifetime (Google: 10 min).
    public let windowSeconds: Int64
    /// The failure code of a refused replay (relay/params: also the `error=` the app receives).
    public static let replayedCode = "replayed_code"
    /// The failure code of a store that did not answer (here, for relay codes and sessions).
    public static let storeUnavailableCode = "store_unavailable"

    public init(store: any Store, windowSeconds: Int64) {
        self.store = store
        self.windowSeconds = windowSeconds
    }

    /// Records the code; succeeds only for its first arrival. Call on `loop`; `completion`
    /// runs on `loop`.
    public func admit(provider: String, code: String, on loop: EventLoop,
                      _ completion: @escaping (Result<Void, CallbackFailure>) -> Void) {
        // The value is irrelevant (only the key's presence matters); one byte keeps it small.
        store.setIfAbsentAcknowledged(key: Self.key(provider: provider, code: code), value: [0x31],
                          ttlSeconds: windowSeconds, on: loop) { result in
            switch result {
            case .success(true):
                completion(.success(()))
            case .success(false):
                completion(.failure(CallbackFailure(
                    .client, code: Self.replayedCode,
                    userMessage: "This sign-in link was already used. Please start signing in again.",
                    logDetail: "authorization code for `\(provider)` was already presented (replay refused)")))
            case .failure(let error):
                completion(.failure(CallbackFailure(
                    .internal, code: Self.storeUnavailableCode,
                    userMessage: Messages.unavailable,
                    logDetail: "replay guard could not record the code: \(error)",
                    // Only a bug of ours (a TTL out of range) is not worth retrying.
                    retryable: error.retryable)))
            }
        }
    }

    public static func key(provider: String, code: String) -> String {
        var input = Array(provider.utf8)
        input.append(0)
        input.append(contentsOf: code.utf8)
        return "replay:" + hex(SHA256.hash(input))
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
