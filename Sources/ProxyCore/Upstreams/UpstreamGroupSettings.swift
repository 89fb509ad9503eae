/// One group of upstream servers: the top-level `upstream`/`upstreams` (the group named
/// `default`, where every request goes that no route sends elsewhere) or one of
/// `upstream_groups:`. Each group has its own servers, health, balancing, retries and
/// upstream timeouts; what is not set is the top level's.
public struct UpstreamGroupSettings: Sendable, Equatable {
    /// The name routes use, in metrics (`group`), log lines and /readyz.
    public var name: String
    public var servers: [UpstreamServer]
    public var health = UpstreamHealthSettings()
    public var balance = UpstreamBalance.roundRobin
    /// Upstream answers that send an idempotent request without a body to another server of
    /// the group, once per server (nginx's `proxy_next_upstream http_502 …`; HAProxy's
    /// `retry-on 502 …`). Empty: the answer goes to the client as it is.
    public var retryStatuses: [Int] = []
    /// `timeouts.upstream_connect` and `timeouts.upstream` for this group (nil: the top level's).
    public var connectTimeout: UInt64? = nil
    public var responseTimeout: UInt64? = nil
    /// Its servers are told about `x_accel_redirect` and their `X-Accel-Redirect` is followed
    /// (`upstream_groups.<name>.x_accel_redirect`): the default group's always are, another's
    /// only when said — nginx's `internal` locations belong to their `server` block, and another
    /// site's app must neither learn the file root nor make the proxy serve this site's files.
    public var followsAccelRedirect = false

    public static let defaultName = "default"

    public init(name: String, servers: [UpstreamServer]) {
        self.name = name
        self.servers = servers
    }
}
