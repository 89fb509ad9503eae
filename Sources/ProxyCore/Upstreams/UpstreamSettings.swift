/// One server of `upstreams:` (or the one `upstream:`).
public struct UpstreamServer: Sendable, Equatable {
    public var target: UpstreamTarget
    /// Its share of requests against the others (1–100; nginx's `weight`).
    public var weight = 1
    /// Gets requests only while no other server is available (nginx's `backup`).
    public var backup = false

    public init(target: UpstreamTarget, weight: Int = 1, backup: Bool = false) {
        self.target = target
        self.weight = weight
        self.backup = backup
    }
}

/// `upstream_health:` — when a server stops getting requests, and how it comes back.
///
/// Passive (always on with two servers or more, as nginx ignores `max_fails` for one): a
/// server that fails `maxFails` times within `failTimeout` — its connection refused or timed
/// out, closed before answering, or an answer in `failStatuses` — is out for `failTimeout`,
/// then tried again. Active (with `checkPath`): a thread of its own asks every server for
/// `checkPath` every `checkInterval`; a server whose answer is not in `checkStatuses` (or that
/// does not answer within `checkTimeout`) is out until a check passes, and one that passive
/// health took out comes back only when a check passes.
public struct UpstreamHealthSettings: Sendable, Equatable {
    public static let second: UInt64 = 1_000_000_000

    public var maxFails = 1
    public var failTimeout: UInt64 = 10 * second
    public var failStatuses: [Int] = [502, 503, 504]
    public var checkPath: String? = nil
    public var checkInterval: UInt64 = 5 * second
    public var checkTimeout: UInt64 = 2 * second
    public var checkStatuses: ClosedRange<Int> = 200...399

    public init() {}
}
