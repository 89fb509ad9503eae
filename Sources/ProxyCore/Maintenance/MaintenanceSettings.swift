/// `maintenance:` — Capistrano's maintenance page, as nginx's `if (-f …/maintenance.html)
/// { return 503; }` serves it: while `file` exists, every request but those on `allow_paths`
/// or from `allow_clients` is answered 503 with it (HTML clients get the file, JSON and text
/// clients the proxy's own 503 in their form), `Retry-After` set. Off while `file` is nil.
public struct MaintenanceSettings: Sendable, Equatable {
    /// The page; its presence turns maintenance on (`cap maintenance:enable` writes
    /// `public/system/maintenance.html`).
    public var file: String? = nil
    /// Paths served as usual (a health check, the assets the page links to), matched as
    /// `protect` matches.
    public var allowPaths: [PathPrefix] = []
    /// Clients served as usual (the team checking the deploy), on the client address
    /// `rate_limits` uses.
    public var allowClients: [CIDR] = []
    /// `Retry-After` on the 503.
    public var retryAfterSeconds = 60

    public init() {}

    /// The largest page served; a bigger file turns maintenance on with the proxy's own page.
    public static let maxPageBytes = 1 << 20
    /// How often each loop looks at the file: the only system call maintenance costs.
    public static let checkInterval: UInt64 = Timeouts.second
}
