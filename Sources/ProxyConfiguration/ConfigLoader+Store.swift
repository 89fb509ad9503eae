import OAuthCallback
import ProxyCore

/// `store` and the `store_*` keys, read into one `StoreSpec`: the URL parsed here once (so a
/// URL that passes `check` also starts), the password and TLS settings beside it.
///
/// ```yaml
/// store: redis+sentinel://10.0.0.11,10.0.0.12/cbp/0   # default: memory
/// store_password_env: REDIS_PASSWORD                   # else CALLBACK_PROXY_REDIS_PASSWORD
/// store_sentinel_password_env: SENTINEL_PASSWORD       # redis+sentinel:// only
/// store_wait_replicas: 1                               # Redis only; default 0
/// store_wait_timeout: 100ms                            # default 100ms
/// ```
extension ConfigLoader {
    func readStore(_ m: MappingReader, into c: inout AppConfig) {
        let storeText = m.string("store")
        // nil: the memory store — or a URL that did not parse, whose problem is reported and
        // which then counts as no Redis store for the checks below.
        var parsed: (topology: RedisSpec.Topology, auth: RedisAuth)? = nil
        if let s = storeText, s != "memory" {
            if let family = RedisSpec.Topology.family(of: s) {
                do {
                    parsed = try RedisSpec.Topology.parse(s)
                } catch {
                    m.problems.add(m.child("store"), m.node("store")?.line, "not a usable \(family) URL: \(error.detail)")
                }
            } else {
                m.problems.add(m.child("store"), m.node("store")?.line, "'\(s)' is not memory, redis://HOST:PORT/DB, rediss://HOST:PORT/DB, redis+sentinel://HOST:PORT,…/MASTER/DB or redis+cluster://HOST:PORT,…")
            }
        }
        var maxBytes = StoreSpec.defaultMaxMemory
        if let v = m.parsed("store_max_memory", "a size from 1k to 64g, like 128m or 1g", {
            Units.size($0).flatMap { $0 >= 1 << 10 && $0 <= 64 << 30 ? $0 : nil }
        }) {
            if parsed != nil {
                m.problems.add(m.child("store_max_memory"), m.node("store_max_memory")?.line,
                               "is only used with the memory store (Redis has its own maxmemory)")
            } else {
                maxBytes = v
            }
        }
        // The Redis password never sits in the file; by default it is CALLBACK_PROXY_REDIS_PASSWORD.
        // Given either way, it replaces a password in the URL.
        let password = secret(m, "store_password", required: false)
        var outsidePassword: Secret? = nil
        if parsed != nil {
            outsidePassword = password ?? environment[Self.redisPasswordVariable].flatMap { $0.isEmpty ? nil : Secret($0) }
        } else if password != nil, (storeText ?? "memory") == "memory" {
            let key = m.has("store_password_env") ? "store_password_env" : "store_password_file"
            m.problems.add(m.child(key), m.node(key)?.line, "is only used with a redis:// store")
        }
        var wait = RedisSpec.Wait()
        if let n = m.int("store_wait_replicas", in: 0...16) {
            if parsed != nil { wait.replicas = n } else if n > 0 {
                m.problems.add(m.child("store_wait_replicas"), m.node("store_wait_replicas")?.line,
                               "is only used with a Redis store (the memory store has no replicas)")
            }
        }
        if let v = m.parsed("store_wait_timeout", "a duration from 1ms to 10s, like 100ms", {
            Units.duration($0).flatMap { $0 >= 1_000_000 && $0 <= 10_000_000_000 ? $0 : nil }
        }) {
            wait.timeoutMS = Int(v / 1_000_000)
        }
        var sentinels = RedisSpec.Sentinels()
        let sentinelURL: RedisSentinelURL? = if case .sentinel(let url, _)? = parsed?.topology { url } else { nil }
        if let b = m.bool("store_sentinel_tls") {
            if sentinelURL?.tls == true { sentinels.tls = b } else if b {
                m.problems.add(m.child("store_sentinel_tls"), m.node("store_sentinel_tls")?.line,
                               "is only used with a rediss+sentinel:// store (the sentinels share its TLS settings)")
            }
        }
        let sentinelPassword = secret(m, "store_sentinel_password", required: false)
        if sentinelURL != nil {
            sentinels.password = sentinelPassword
        } else if sentinelPassword != nil {
            let key = m.has("store_sentinel_password_env") ? "store_sentinel_password_env" : "store_sentinel_password_file"
            m.problems.add(m.child(key), m.node(key)?.line, "is only used with a redis+sentinel:// or rediss+sentinel:// store")
        }
        // Judged by the text, not the parse: a TLS URL with a typo gets only its own problem.
        var tls = UpstreamTLSSettings()
        readStoreTLS(m, tls: storeText.map {
                         $0.hasPrefix("rediss://") || $0.hasPrefix(RedisSentinelURL.tlsScheme) || $0.hasPrefix(RedisClusterURL.tlsScheme)
                     } == true,
                     into: &tls)
        guard var (topology, auth) = parsed else {
            c.store = .memory(maxBytes: maxBytes)
            return
        }
        if let sentinelURL { topology = .sentinel(sentinelURL, sentinels) }
        if let outsidePassword {
            // `redis://user@host` with the password given outside the file: the lone name is
            // the ACL user (operations.md's form). Alone it is a password, as redis-cli reads it
            // — but a password the outside one replaces cannot have been meant.
            if auth.username == nil, let text = storeText, Self.hasLoneUserinfo(text) { auth.username = auth.password?.value }
            auth.password = outsidePassword
        }
        c.store = .redis(RedisSpec(topology, auth: auth, tls: tls, wait: wait))
    }

    /// Whether the URL's userinfo (before the authority's last `@`) is one token without `:`.
    static func hasLoneUserinfo(_ url: String) -> Bool {
        let parts = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        // "scheme:", "", authority, rest
        guard parts.count >= 3, parts[0].hasSuffix(":"), parts[1].isEmpty else { return false }
        let authority = parts[2]
        guard let at = authority.lastIndex(of: "@") else { return false }
        let userinfo = authority[..<at]
        return !userinfo.isEmpty && !userinfo.contains(":")
    }

    /// `store_tls_ca`, `store_tls_client_cert`, `store_tls_client_key`: only with a
    /// `rediss://` store. Like `upstream_tls`, the files are read when the store is built; the
    /// CA file is checked for readability here so that `check` names it.
    private func readStoreTLS(_ m: MappingReader, tls: Bool, into u: inout UpstreamTLSSettings) {
        let ca = m.string("store_tls_ca")
        let cert = m.string("store_tls_client_cert")
        let key = m.string("store_tls_client_key")
        guard tls else {
            for (name, value) in [("store_tls_ca", ca), ("store_tls_client_cert", cert), ("store_tls_client_key", key)] where value != nil {
                m.problems.add(m.child(name), m.node(name)?.line, "is only used with a rediss:// (TLS) store")
            }
            return
        }
        if let f = ca {
            if readFile(f) == nil { m.problems.add(m.child("store_tls_ca"), m.node("store_tls_ca")?.line, "cannot read '\(f)'") } else { u.caFile = f }
        }
        if (cert == nil) != (key == nil) {
            let (given, missing) = cert == nil ? ("store_tls_client_key", "store_tls_client_cert") : ("store_tls_client_cert", "store_tls_client_key")
            m.problems.add(m.child(given), m.node(given)?.line, "needs \(missing) as well")
        } else {
            u.clientCertFile = cert
            u.clientKeyFile = key
        }
    }
}
