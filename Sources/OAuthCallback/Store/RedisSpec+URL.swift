extension RedisSpec.Topology {
    /// The family `text` belongs to, named by its plain scheme (`redis://`, `redis+sentinel://`,
    /// `redis+cluster://`; the TLS forms included); nil when it is no Redis URL at all.
    public static func family(of text: String) -> String? {
        if RedisSentinelURL.isSentinel(text) { return RedisSentinelURL.scheme }
        if RedisClusterURL.isCluster(text) { return RedisClusterURL.scheme }
        if text.hasPrefix("redis://") || text.hasPrefix("rediss://") { return "redis://" }
        return nil
    }

    /// Parses a URL of any family, and takes its credentials out into a `RedisAuth` (the
    /// topology keeps none). The error's detail never contains the password.
    public static func parse(_ text: String) throws(StoreError) -> (RedisSpec.Topology, RedisAuth) {
        if RedisSentinelURL.isSentinel(text) {
            var url = try RedisSentinelURL(parsing: text)
            let auth = RedisAuth(username: url.username, password: url.password.map(Secret.init))
            url.username = nil
            url.password = nil
            return (.sentinel(url, RedisSpec.Sentinels()), auth)
        }
        if RedisClusterURL.isCluster(text) {
            var url = try RedisClusterURL(parsing: text)
            let auth = RedisAuth(username: url.username, password: url.password.map(Secret.init))
            url.username = nil
            url.password = nil
            return (.cluster(url), auth)
        }
        var url = try RedisURL(parsing: text)
        let auth = RedisAuth(username: url.username, password: url.password.map(Secret.init))
        url.username = nil
        url.password = nil
        return (.single(url), auth)
    }
}

extension RedisSpec {
    /// What a data-node connection logs in with, with `auth` put back. With Sentinel: the
    /// master's login, database and TLS; its host is the first sentinel's and unused (the
    /// master's address comes from the sentinels). With Cluster: every node's login and TLS,
    /// database 0; its host is the first seed's and unused (each node is connected to by address).
    var dataURL: RedisURL {
        var url: RedisURL
        switch topology {
        case .single(let single):
            url = single
        case .sentinel(let sentinels, _):
            let first = sentinels.sentinels.first ?? RedisEndpoint(host: "", port: RedisSentinelURL.defaultPort)
            url = RedisURL(host: first.host, port: first.port, database: sentinels.database, tls: sentinels.tls)
        case .cluster(let cluster):
            let first = cluster.seeds.first ?? RedisEndpoint(host: "", port: RedisClusterURL.defaultPort)
            url = RedisURL(host: first.host, port: first.port, database: 0, tls: cluster.tls)
        }
        url.username = auth.username
        url.password = auth.password?.value
        return url
    }

    /// The Sentinel URL with `auth` put back (its `description` shows whether there is a password).
    var sentinelURL: RedisSentinelURL? {
        guard case .sentinel(var url, _) = topology else { return nil }
        url.username = auth.username
        url.password = auth.password?.value
        return url
    }

    /// The Cluster URL with `auth` put back (its `description` shows whether there is a password).
    var clusterURL: RedisClusterURL? {
        guard case .cluster(var url) = topology else { return nil }
        url.username = auth.username
        url.password = auth.password?.value
        return url
    }
}
