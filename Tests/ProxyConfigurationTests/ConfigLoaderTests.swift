import OAuthCallback
import ProxyCore
import Testing
@testable import ProxyConfiguration

@Suite struct ConfigLoaderTests {
    let env = ["GOOGLE_WEB_SECRET": "web-secret", "FB_SECRET": "fb-secret",
               "SESSION_SECRET": "a-session-secret-of-at-least-32-characters", "SENTINEL_PW": "sentinel-pw"]
    let files = ["/keys/apple.p8": "-----BEGIN PRIVATE KEY-----\nMIG...\n-----END PRIVATE KEY-----\n",
                 "/keys/empty": "\n", "/keys/assertion.pem": ConfigKeysTests.p256]

    func loader() -> ConfigLoader {
        let files = self.files
        return ConfigLoader(environment: env, readFile: { files[$0] })
    }

    func problems(_ text: String) -> [String] {
        switch loader().load(text: text) {
        case .success: return []
        case .failure(let p): return p.items.map { "\($0.path): \($0.message)" }
        }
    }

    static let full = """
    listen: [127.0.0.1:9000, "[::1]:9000"]
    internal_listen: 127.0.0.1:9001
    upstream: http://127.0.0.1:3000
    loops: 2
    store: memory
    access_log: off
    log: { level: warn, format: text }
    limits: { max_body_size: 10m, max_header_size: 16k }
    timeouts: { client_header: 5s, client_body: 30s, keepalive: 1m, upstream_connect: 2s, upstream: 20s, drain: 10s }
    trusted_proxies: [10.0.0.0/8]
    oauth:
      callback_path: /_oauth_callback
      replay_window: 15m
      clock_leeway: 2m
      idp_timeout: 5s
      session: { secret_env: SESSION_SECRET, protect: [/admin], skip: [/admin/health], allowed_redirect_hosts: [app.example.com],
                 server_side: true, error_url: "https://app.example.com/oops", web_redirect_uri: "https://app.example.com/_oauth/web_callback",
                 allowed_email_domains: [Example.COM, .example.org], allowed_groups: [staff],
                 path_rules: [{ prefix: /admin, allowed_groups: [admins] }] }
    providers:
      google:
        handoff: relay
        app_callback: /users/auth/google_oauth2/callback
        app_client: { id: web-id, secret_env: GOOGLE_WEB_SECRET }
        native:
          ios: { client_id: 123-ios.apps.googleusercontent.com }
          android: { client_id: 123-and.apps.googleusercontent.com, redirect_uri: "com.example.app:/oauth2redirect" }
      facebook:
        handoff: params
        app_callback: /users/auth/facebook/callback
        app_id: "1234567890"
        app_secret_env: FB_SECRET
        native:
          ios: { client_id: "1234567890" }
      corp:
        kind: oidc
        handoff: session
        app_client: { id: corp-web, secret_env: GOOGLE_WEB_SECRET, client_auth: client_secret_basic }
        endpoints: { issuer: "https://login.example.com", authorization: "https://login.example.com/authorize" }
        native:
          android: { client_id: corp-android, redirect_uri: "com.example.app:/oauth2redirect" }
      apple:
        handoff: relay
        app_callback: /users/auth/apple/callback
        app_client: { id: com.example.web, secret_env: GOOGLE_WEB_SECRET }
        team_id: TEAM
        key_id: KEY
        private_key_file: /keys/apple.p8
        native:
          ios: { client_id: com.example.app, redirect_uri: "com.example.app:/callback" }
    """

    @Test func aCompleteFileLoadsEveryKey() throws {
        let c = try loader().load(text: Self.full).get()
        #expect(c.listen.map(\.description) == ["127.0.0.1:9000", "[::1]:9000"])
        #expect(c.internalListen?.description == "127.0.0.1:9001")
        #expect(c.upstream?.description == "127.0.0.1:3000")
        #expect(c.loops == 2)
        #expect(c.accessLog == "off")
        #expect(c.logLevel == .warn)
        #expect(c.proxy.maxBodySize == 10 << 20)
        #expect(c.proxy.limits.maxHeadBytes == 16 << 10)
        #expect(c.proxy.timeouts.keepAlive == 60_000_000_000)
        #expect(c.proxy.timeouts.upstreamResponse == 20_000_000_000)
        #expect(c.proxy.trustedProxies.count == 1)
        #expect(c.oauth.replayWindowSeconds == 900)
        #expect(c.oauth.clockLeewaySeconds == 120)
        let google = try #require(c.oauth.providers["google"])
        #expect(google.kind == .google)
        #expect(google.native["ios"]?.redirectURI == "com.googleusercontent.apps.123-ios:/oauth2redirect")
        #expect(google.native["android"]?.redirectURI == "com.example.app:/oauth2redirect")
        #expect(google.appClient?.clientSecret.value == "web-secret")
        let fb = try #require(c.oauth.providers["facebook"])
        #expect(fb.facebook?.appSecret.value == "fb-secret")
        #expect(fb.native["ios"]?.redirectURI == "fb1234567890://authorize")
        #expect(c.oauth.providers["apple"]?.apple?.teamID == "TEAM")
        let session = try #require(c.oauth.session)
        #expect(session.secrets.count == 1)
        #expect(session.requiresSession("/admin/users"))
        #expect(!session.requiresSession("/admin/health"))
        #expect(!session.requiresSession("/public"))
        #expect(session.allowedRedirectHosts == ["app.example.com"])
        #expect(session.serverSide == true)
        #expect(session.errorURL == "https://app.example.com/oops")
        #expect(session.webRedirectURI == "https://app.example.com/_oauth/web_callback")
        #expect(c.oauth.providers["corp"]?.appClient?.clientAuth == .basic)
        #expect(google.appClient?.clientAuth == .post, "client_secret_post unless configured")
    }

    @Test func appleLinkPathsDefaultToEveryAppCallbackAndTheCallbackPath() throws {
        let given = Self.full.replacingOccurrences(of: "  idp_timeout: 5s\n",
            with: "  idp_timeout: 5s\n  app_links: { apple: { app_ids: [ABCDE12345.com.example.app] } }\n")
        let c = try loader().load(text: given).get()
        #expect(c.oauth.appLinks?.apple?.paths == ["/users/auth/apple/callback", "/users/auth/facebook/callback",
                                                   "/users/auth/google_oauth2/callback", "/_oauth_callback*"])
        let explicit = Self.full.replacingOccurrences(of: "  idp_timeout: 5s\n",
            with: "  idp_timeout: 5s\n  app_links: { apple: { app_ids: [ABCDE12345.com.example.app], paths: [/x] } }\n")
        #expect(try loader().load(text: explicit).get().oauth.appLinks?.apple?.paths == ["/x"])
    }

    @Test func serverSideSessionsFollowTheStoreUnlessConfigured() throws {
        let c = try loader().load(text: """
        oauth: { session: { secret_env: SESSION_SECRET, allow_any_authenticated_user: true } }
        providers:
          google:
            handoff: session
            app_client: { id: web, secret_env: GOOGLE_WEB_SECRET }
            native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
        """).get()
        #expect(c.oauth.session?.serverSide == nil, "nil: decided by the store at start-up")
    }

    @Test(arguments: ["facebook", "apple"])
    func sessionModeIsRefusedForKindsWithoutAWebCallback(kind: String) {
        let p = problems("""
        oauth: { session: { secret_env: SESSION_SECRET } }
        providers:
          p:
            kind: \(kind)
            handoff: session
            app_client: { id: "1234567890", secret_env: GOOGLE_WEB_SECRET }
            app_id: "1234567890"
            app_secret_env: FB_SECRET
            team_id: TEAM
            key_id: KEY
            private_key_file: /keys/apple.p8
            native: { ios: { client_id: "1234567890", redirect_uri: "fb1234567890://authorize" } }
        """).filter { $0.hasPrefix("providers.p.handoff") }
        #expect(p == ["providers.p.handoff: session is not available for kind \(kind): its web sign-in (/_oauth/web_callback) is supported for google and oidc only; use relay or params"])
    }

    @Test(arguments: [
        ("error_url: https://evil.example/x", "oauth.session.error_url: must be a local path or an https:// URL on allowed_redirect_hosts"),
        ("error_url: //evil.example/x", "oauth.session.error_url: must be a local path or an https:// URL on allowed_redirect_hosts"),
        ("web_redirect_uri: https://app.example.com/callback", "oauth.session.web_redirect_uri: must be https://HOST/_oauth/web_callback (http:// only with secure: false), without a query"),
        ("web_redirect_uri: http://app.example.com/_oauth/web_callback", "oauth.session.web_redirect_uri: must be https://HOST/_oauth/web_callback (http:// only with secure: false), without a query"),
        ("server_side: maybe", "oauth.session.server_side: 'maybe' is not true or false"),
    ])
    func badSessionKeysAreNamed(line: String, problem: String) {
        let p = problems("""
        oauth:
          session:
            secret_env: SESSION_SECRET
            \(line)
        providers:
          google:
            handoff: session
            app_client: { id: web, secret_env: GOOGLE_WEB_SECRET, client_auth: client_secret_jwt }
            native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
        """)
        #expect(p.contains(problem), "\(p)")
        #expect(p.contains { $0.hasPrefix("providers.google.app_client.client_auth:") })
    }

    @Test func everyProblemIsReportedAtOnceWithItsPath() {
        let text = """
        listen: nowhere
        upstrem: http://127.0.0.1:3000
        timeouts: { client_header: soon }
        providers:
          google:
            handoff: relay
            app_callback: users/callback
            app_client: { id: web, secret: inline-secret }
            native:
              ios: { client_id: not-a-google-id }
              windows: { client_id: x }
        """
        let p = problems(text)
        #expect(p.contains("listen: 'nowhere' is not HOST:PORT, [V6]:PORT or unix:/path"))
        #expect(p.contains("upstrem: unknown key"))
        #expect(p.contains("timeouts.client_header: 'soon' is not a duration like 500ms, 10s or 2m"))
        #expect(p.contains("providers.google.app_callback: must be a path starting with a single /, without a query"))
        #expect(p.contains { $0.hasPrefix("providers.google.app_client.secret: secrets are not accepted inline") })
        #expect(p.contains("providers.google.native.ios.redirect_uri: is required (it cannot be derived for this client)"))
        #expect(p.contains("providers.google.native.windows: unknown platform (ios, android)"))
        #expect(p.count == 7, "\(p)")
    }

    @Test func http2SettingsHaveDefaultsBoundsAndTheirTLSSwitch() throws {
        let base = "upstream: http://127.0.0.1:3000\n"
        let defaults = try loader().load(text: base).get()
        #expect(defaults.proxy.http2 == HTTP2Settings())
        #expect(defaults.proxy.http2.maxConcurrentStreams == 128 && !defaults.proxy.http2.cleartext)
        let c = try loader().load(text: base + """
            http2: { cleartext: true, max_concurrent_streams: 64, stream_window: 128k, connection_window: 2m, max_resets_per_second: 20, reset_burst: 200 }
            tls: { cert: /c.pem, key: /k.pem, http2: false }
            timeouts: { client_send: 20s }
            """).get()
        #expect(c.proxy.http2.cleartext)
        #expect(c.proxy.http2.maxConcurrentStreams == 64)
        #expect(c.proxy.http2.streamWindow == 128 << 10 && c.proxy.http2.connectionWindow == 2 << 20)
        #expect(c.proxy.http2.resetsPerSecond == 20 && c.proxy.http2.resetBurst == 200)
        #expect(c.tls?.http2 == false)
        #expect(c.proxy.timeouts.clientSend == 20_000_000_000)
        #expect(try loader().load(text: base + "tls: { cert: /c.pem, key: /k.pem }\n").get().tls?.http2 == true)
        #expect(problems(base + "http2: { stream_window: 8k, max_concurrent_streams: 0, bogus: 1 }\n").sorted() == [
            "http2.bogus: unknown key",
            "http2.max_concurrent_streams: '0' is not a whole number from 1 to 10000",
            "http2.stream_window: '8k' is not a size from 16k to 16m, like 256k",
        ])
    }

    @Test func upstreamIdleConnectionsHaveNoCapByDefaultAndShareOutOverLoops() throws {
        let base = "upstream: http://127.0.0.1:3000\n"
        let defaults = try loader().load(text: base).get()
        #expect(defaults.proxy.upstreamIdleConnections == 0)
        #expect(defaults.proxy.upstreamPoolCapacity(loops: 2) == Int.max)
        #expect(defaults.proxy.timeouts.upstreamIdle == 15_000_000_000)
        let c = try loader().load(text: base + "limits: { upstream_idle_connections: 5 }\ntimeouts: { upstream_idle: 4s }\n").get()
        #expect(c.proxy.upstreamIdleConnections == 5)
        #expect(c.proxy.upstreamPoolCapacity(loops: 2) == 3 && c.proxy.upstreamPoolCapacity(loops: 8) == 1)
        #expect(c.proxy.timeouts.upstreamIdle == 4_000_000_000)
        #expect(problems(base + "limits: { upstream_idle_connections: -1 }\n") == [
            "limits.upstream_idle_connections: '-1' is not a number of connections from 0 (no cap) to 10000000",
        ])
    }

    @Test func storeWaitReplicasIsForRedisStoresOnly() throws {
        let redis = "upstream: http://127.0.0.1:3000\nstore: redis://127.0.0.1:6379/0\n"
        let c = try loader().load(text: redis + "store_wait_replicas: 2\nstore_wait_timeout: 250ms\n").get()
        #expect(c.store.redis?.wait == RedisSpec.Wait(replicas: 2, timeoutMS: 250))
        let defaults = try loader().load(text: redis).get()
        #expect(defaults.store.redis?.wait == RedisSpec.Wait(replicas: 0, timeoutMS: 100))
        #expect(problems("upstream: http://127.0.0.1:3000\nstore_wait_replicas: 1\n")
                == ["store_wait_replicas: is only used with a Redis store (the memory store has no replicas)"])
        #expect(problems(redis + "store_wait_timeout: 20s\n") == ["store_wait_timeout: '20s' is not a duration from 1ms to 10s, like 100ms"])
    }

    @Test func theProviderCheckIntervalIsOffAtZeroAndBoundedOtherwise() throws {
        let base = "upstream: http://127.0.0.1:3000\noauth: { provider_check_interval: "
        #expect(try loader().load(text: "upstream: http://127.0.0.1:3000\n").get().oauth.providerCheckInterval == 300_000_000_000)
        #expect(try loader().load(text: base + "0 }\n").get().oauth.providerCheckInterval == 0)
        #expect(try loader().load(text: base + "1h }\n").get().oauth.providerCheckInterval == 3_600_000_000_000)
        for refused in ["5s", "25h", "soon"] {
            #expect(problems(base + refused + " }\n")
                    == ["oauth.provider_check_interval: '\(refused)' is not 0 (off) or a duration from 10s to 24h"])
        }
    }

    @Test func anUpstreamHostNameAndItsLookupInterval() throws {
        let c = try loader().load(text: "upstream: http://app:3000\nupstream_resolve_interval: 30s\n").get()
        #expect(c.upstream?.endpoint == .name("app", port: 3000))
        #expect(c.upstreamResolveInterval == 30_000_000_000)
        let once = try loader().load(text: "upstream: https://api.internal\nupstream_resolve_interval: 0\n").get()
        #expect(once.upstream?.endpoint == .name("api.internal", port: 443))
        #expect(once.upstreamResolveInterval == 0)
        #expect(try loader().load(text: "upstream: http://app:3000\n").get().upstreamResolveInterval == 10_000_000_000)
        #expect(problems("upstream: http://app:3000\nupstream_resolve_interval: soon\n").map { $0.prefix(26) }
                == ["upstream_resolve_interval:"])
        #expect(problems("upstream: http://my_app:3000\n").map { $0.prefix(9) } == ["upstream:"])
    }

    @Test func theMemoryStoresBound() throws {
        #expect(try loader().load(text: "upstream: http://127.0.0.1:1\n").get().store == .memory(maxBytes: 128 << 20))
        #expect(try loader().load(text: "upstream: http://127.0.0.1:1\nstore_max_memory: 1g\n").get().store == .memory(maxBytes: 1 << 30))
        #expect(problems("upstream: http://127.0.0.1:1\nstore_max_memory: 100\n").map { $0.prefix(17) } == ["store_max_memory:"])
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis://127.0.0.1:6379/0\nstore_max_memory: 1g\n")
            == ["store_max_memory: is only used with the memory store (Redis has its own maxmemory)"])
    }

    @Test func aSentinelStoreWithTheSentinelsOwnPassword() throws {
        let c = try loader().load(text: """
        upstream: http://127.0.0.1:1
        store: redis+sentinel://10.0.0.1,10.0.0.2:26380/cbp/1
        store_sentinel_password_env: SENTINEL_PW
        """).get()
        #expect(c.store.redis?.topology == .sentinel(RedisSentinelURL(sentinels: [.init(host: "10.0.0.1", port: 26379),
                                                                                 .init(host: "10.0.0.2", port: 26380)],
                                                                       masterName: "cbp", database: 1),
                                                      RedisSpec.Sentinels(password: Secret("sentinel-pw"))))
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis+sentinel://10.0.0.1/\n")
            == ["store: not a usable redis+sentinel:// URL: redis sentinel url: missing /MASTER (the sentinels' name for the master)"])
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis://10.0.0.1/0\nstore_sentinel_password_env: SENTINEL_PW\n")
            == ["store_sentinel_password_env: is only used with a redis+sentinel:// or rediss+sentinel:// store"])
        // TLS to the sentinels too: only where the master is spoken to over TLS.
        #expect(try loader().load(text: "upstream: http://127.0.0.1:1\nstore: rediss+sentinel://10.0.0.1/cbp/0\nstore_sentinel_tls: true\n")
            .get().store.redis?.topology == .sentinel(RedisSentinelURL(sentinels: [.init(host: "10.0.0.1", port: 26379)],
                                                                       masterName: "cbp", tls: true), RedisSpec.Sentinels(tls: true)))
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis+sentinel://10.0.0.1/cbp/0\nstore_sentinel_tls: true\n")
            == ["store_sentinel_tls: is only used with a rediss+sentinel:// store (the sentinels share its TLS settings)"])
        // TLS to the master: store_tls_* apply to rediss+sentinel:// and only there.
        let tls = try loader().load(text: "upstream: http://127.0.0.1:1\nstore: rediss+sentinel://10.0.0.1/cbp\nstore_tls_ca: /keys/apple.p8\n").get()
        #expect(tls.store.redis?.tls.caFile == "/keys/apple.p8")
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis+sentinel://10.0.0.1/cbp\nstore_tls_ca: /keys/apple.p8\n")
            == ["store_tls_ca: is only used with a rediss:// (TLS) store"])
    }

    @Test func aClusterStoreHasOnlyDatabaseZeroAndNoSentinelPassword() throws {
        let c = try loader().load(text: "upstream: http://127.0.0.1:1\nstore: redis+cluster://10.0.0.1,10.0.0.2:7001\n").get()
        #expect(c.store == .redis(RedisSpec(.cluster(RedisClusterURL(seeds: [.init(host: "10.0.0.1", port: 6379),
                                                                           .init(host: "10.0.0.2", port: 7001)])))))
        #expect(try loader().load(text: "upstream: http://127.0.0.1:1\nstore: redis+cluster://10.0.0.1/0\n").get().store
                == .redis(RedisSpec(.cluster(RedisClusterURL(seeds: [.init(host: "10.0.0.1", port: 6379)])))))
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis+cluster://10.0.0.1/2\n")
            == ["store: not a usable redis+cluster:// URL: redis cluster url: Redis Cluster has only database 0 (it refuses SELECT): "
                + "leave the path out or use /0, not /2"])
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis+cluster://10.0.0.1\nstore_sentinel_password_env: SENTINEL_PW\n")
            == ["store_sentinel_password_env: is only used with a redis+sentinel:// or rediss+sentinel:// store"])
        // TLS to every node: store_tls_* apply to rediss+cluster:// and only there.
        let tls = try loader().load(text: "upstream: http://127.0.0.1:1\nstore: rediss+cluster://10.0.0.1\nstore_tls_ca: /keys/apple.p8\n").get()
        #expect(tls.store.redis?.tls.caFile == "/keys/apple.p8")
        #expect(problems("upstream: http://127.0.0.1:1\nstore: redis+cluster://10.0.0.1\nstore_tls_ca: /keys/apple.p8\n")
            == ["store_tls_ca: is only used with a rediss:// (TLS) store"])
    }

    @Test func problemsNeverQuoteSecretValues() {
        let p = problems("""
        providers:
          google:
            app_callback: /cb
            app_client: { id: web, secret: hunter2 }
            native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
        """)
        #expect(!p.isEmpty)
        #expect(!p.joined().contains("hunter2"))
    }

    @Test(arguments: [
        ("secret_env: MISSING_VAR", "providers.google.app_client.secret_env: environment variable MISSING_VAR is not set"),
        ("secret_file: /nope", "providers.google.app_client.secret_file: cannot read '/nope'"),
        ("secret_file: /keys/empty", "providers.google.app_client.secret_file: '/keys/empty' is empty"),
        ("secret_env: GOOGLE_WEB_SECRET, secret_file: /keys/apple.p8", "providers.google.app_client.secret: give either secret_env or secret_file, not both"),
    ])
    func secretSourcesAreChecked(line: String, expected: String) {
        let p = problems("""
        providers:
          google:
            app_callback: /cb
            app_client: { id: web, \(line) }
            native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
        """)
        #expect(p == [expected])
    }

    @Test(arguments: [
        ("kind: gitlab", "providers.p.kind: 'gitlab' is not google, facebook, apple or oidc"),
        ("kind: oidc", "providers.p.endpoints.issuer: an oidc provider needs endpoints.issuer or endpoints.discovery"),
        ("kind: google\n    endpoints: { token: http://idp.example.com/token }", "providers.p.endpoints.token: must be an https:// URL (http:// only for loopback)"),
        ("kind: google\n    algorithms: [HS256]", "providers.p.algorithms: 'HS256' is not supported (RS256, ES256)"),
        // One message for one mistake: the refused issuer is not also reported as missing.
        ("kind: oidc\n    endpoints: { issuer: http://idp.example.com }", "providers.p.endpoints.issuer: must be an https:// URL (http:// only for loopback)"),
    ])
    func providerMistakesAreNamed(extra: String, expected: String) {
        let p = problems("""
        providers:
          p:
            \(extra)
            handoff: params
            app_callback: /cb
            native: { android: { client_id: x, redirect_uri: "app:/cb" } }
        """)
        #expect(p == [expected])
    }

    @Test func clientAuthWithoutASecretIsNamed() {
        let p = problems("""
        providers:
          p:
            kind: oidc
            endpoints: { issuer: https://idp.example.com }
            handoff: params
            app_callback: /cb
            native: { android: { client_id: x, redirect_uri: "app:/cb", client_auth: client_secret_basic } }
        """)
        #expect(p == ["providers.p.native.android.client_auth: names how to send a client secret, but the client has none: add client_secret_env or client_secret_file"])
    }

    @Test func aFacebookNativeClientIsTheAppItself() {
        let p = problems("""
        providers:
          facebook:
            handoff: params
            app_callback: /cb
            app_id: "111"
            app_secret_env: FB_SECRET
            native: { ios: { client_id: "222" } }
        """)
        #expect(p == ["providers.facebook.native.ios.client_id: must equal app_id for a facebook provider"])
    }

    @Test func sessionModeNeedsItsSecretAndTheWebClient() {
        let p = problems("""
        providers:
          google:
            handoff: session
            native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
        """)
        #expect(p == ["oauth.session: is required when a provider uses handoff session (at least secret_env or secret_file)",
                      "providers.google.app_client: is required for handoff session (/_oauth/start sends the app's web client)"])
        let short = problems("""
        oauth: { session: { secret_env: FB_SECRET, allowed_emails: [a@example.com] } }
        providers:
          google:
            handoff: session
            app_client: { id: web, secret_env: GOOGLE_WEB_SECRET }
            native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
        """)
        #expect(short == ["oauth.session.secret_env: must be at least 32 characters"])
    }

    static let sessionProvider = """
    providers:
      google:
        handoff: session
        app_client: { id: web, secret_env: GOOGLE_WEB_SECRET }
        native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
    """

    @Test func sessionModeRefusesToStartWithoutARuleForWhoMayEnter() {
        let p = problems("oauth: { session: { secret_env: SESSION_SECRET } }\n" + Self.sessionProvider)
        #expect(p.count == 1)
        #expect(p.first?.hasPrefix("oauth.session: session mode needs a rule for who may enter: allowed_email_domains, allowed_emails") == true)
        #expect(p.first?.contains("allow_any_authenticated_user: true") == true)
        // Said outright, everyone may enter.
        #expect(problems("oauth: { session: { secret_env: SESSION_SECRET, allow_any_authenticated_user: true } }\n" + Self.sessionProvider) == [])
    }

    @Test func accessRulesLoadLowerCasedAndPathRulesKeepTheirPrefix() throws {
        let c = try loader().load(text: """
        oauth:
          session:
            secret_env: SESSION_SECRET
            allowed_email_domains: [Example.COM, .Corp.Example]
            allowed_emails: [Alice@Example.NET]
            allowed_groups: [Staff]
            allowed_hosted_domains: [Example.com]
            groups_claim: realm_access.roles
            path_rules: [{ prefix: /admin/, allowed_groups: [admins] }]
        """ + "\n" + Self.sessionProvider).get()
        let s = try #require(c.oauth.session)
        #expect(s.access.emailDomains == ["example.com", ".corp.example"])
        #expect(s.access.emails == ["alice@example.net"])
        #expect(s.access.groups == ["Staff"], "group names are the IdP's: kept as written")
        #expect(s.access.hostedDomains == ["example.com"])
        #expect(s.groupsClaim == "realm_access.roles")
        #expect(s.pathRules.map(\.prefix.description) == ["/admin"])
        #expect(s.requiresSession("/ADMIN/x"), "a path rule's path needs a session")
    }

    @Test func denyRulesMethodRoutesAndPreflightLoad() throws {
        let c = try loader().load(text: """
        oauth:
          session:
            secret_env: SESSION_SECRET
            allow_any_authenticated_user: true
            denied_emails: [Bob@Example.NET]
            denied_email_domains: [.Contractors.Example]
            denied_groups: [suspended]
            protect: all
            skip: [/health, "GET /api/public", "GET,HEAD /feed"]
            skip_preflight: true
            path_rules: [{ prefix: /admin, denied_groups: [interns] }]
        """ + "\n" + Self.sessionProvider).get()
        let s = try #require(c.oauth.session)
        #expect(s.access.anyAuthenticatedUser, "deny rules may stand beside it")
        #expect(s.access.deniedEmails == ["bob@example.net"])
        #expect(s.access.deniedEmailDomains == [".contractors.example"])
        #expect(s.access.deniedGroups == ["suspended"])
        #expect(s.skip.map(\.description) == ["/health"])
        #expect(s.skipRoutes == [.init(methods: [.get], prefix: try! PathPrefix.parse("/api/public").get()),
                                 .init(methods: [.get, .head], prefix: try! PathPrefix.parse("/feed").get())])
        #expect(s.skipPreflight)
        #expect(s.pathRules.first?.rule.deniedGroups == ["interns"], "a path rule may only deny")
    }

    @Test func theUserClaimMayBeAnyClaim() throws {
        func claim(_ text: String) throws -> IdentityHeaderNames.UserClaim? {
            try loader().load(text: "oauth: { session: { secret_env: SESSION_SECRET, allowed_emails: [a@b.c], headers: { user_claim: \"\(text)\" } } }\n"
                              + Self.sessionProvider).get().oauth.session?.headers.userClaim
        }
        #expect(try claim("preferred_username") == .preferredUsername)
        #expect(try claim("ext.login") == .claim("ext.login"))
        let c = try loader().load(text: "oauth: { session: { secret_env: SESSION_SECRET, allowed_emails: [a@b.c], headers: { user_claim: employee_id } } }\n"
                                  + Self.sessionProvider).get()
        #expect(c.oauth.session?.claimPaths == ["employee_id"], "kept in the session")
        #expect(problems("oauth: { session: { secret_env: SESSION_SECRET, allowed_emails: [a@b.c], headers: { user_claim: \"a..b\" } } }\n"
                         + Self.sessionProvider).count == 1)
    }

    @Test func claimRulesLoadGloballyAndPerPath() throws {
        let c = try loader().load(text: """
        oauth:
          session:
            secret_env: SESSION_SECRET
            allowed_claims: [{ claim: department, equals: eng }, { claim: realm_access.roles, contains: ops }]
            path_rules: [{ prefix: /billing, allowed_claims: [{ claim: tier, in: [gold, platinum] }] }]
        """ + "\n" + Self.sessionProvider).get()
        let s = try #require(c.oauth.session)
        #expect(s.access.claims == [ClaimRule(claim: "department", match: .equals("eng")),
                                    ClaimRule(claim: "realm_access.roles", match: .contains("ops"))])
        #expect(s.pathRules.first?.rule.claims == [ClaimRule(claim: "tier", match: .oneOf(["gold", "platinum"]))])
        #expect(s.claimPaths == ["department", "realm_access.roles", "tier"])
    }

    @Test(arguments: [
        ("{ claim: a }", "needs exactly one of equals, contains or in"),
        ("{ claim: a, equals: x, contains: y }", "needs exactly one of equals, contains or in"),
        ("{ claim: a.., equals: x }", "must be a claim name, or a dotted path"),
        ("{ claim: a, in: [] }", "is empty: it would let nobody in"),
        ("{ equals: x }", "claim"),
    ])
    func aClaimRuleThatCannotBeReadIsNamed(_ entry: String, _ message: String) {
        let p = problems("oauth: { session: { secret_env: SESSION_SECRET, allowed_emails: [a@b.c], allowed_claims: [\(entry)] } }\n"
                         + Self.sessionProvider)
        #expect(p.count == 1 && p.first?.hasPrefix("oauth.session.allowed_claims[0]") == true && p.first?.contains(message) == true, "\(p)")
    }

    @Test(arguments: ["FETCH /x", "GET", "GET /a /b", "get /x", "GET,, /x", "GET x"])
    func aSkipEntryThatIsNeitherAPathNorARouteIsNamed(_ entry: String) {
        let p = problems("oauth: { session: { secret_env: SESSION_SECRET, allow_any_authenticated_user: true, skip: [\"\(entry)\"] } }\n"
                         + Self.sessionProvider)
        #expect(p.count == 1 && p.first?.hasPrefix("oauth.session.skip:") == true, "\(entry): \(p)")
    }

    @Test func perClientLimitsLoad() throws {
        let c = try loader().load(text: """
        limits: { max_connections_per_client: 64, exempt_clients: [192.0.2.0/24, "2001:db8::/32"], dry_run: true }
        rate_limits:
          - { name: site, rate: 50/s, burst: 200 }
          - { name: login, paths: [/users/sign_in, /users/password], rate: 10/m, dry_run: true }
          - { rate: 5/s }
        """).get()
        let l = c.proxy.clientLimits
        #expect(l.maxConnectionsPerClient == 64)
        #expect(l.exempt == [CIDR.parse("192.0.2.0/24")!, CIDR.parse("2001:db8::/32")!])
        #expect(l.dryRun)
        #expect(l.rules.map(\.name) == ["site", "login", "rate_limits[2]"])
        #expect(l.rules[0].rate == RateLimit(count: 50, periodSeconds: 1) && l.rules[0].burst == 200 && l.rules[0].paths.isEmpty)
        #expect(l.rules[1].paths.map(\.description) == ["/users/sign_in", "/users/password"] && l.rules[1].burst == nil && l.rules[1].dryRun)
        // None configured: no rules, and the connection cap derived from the budget.
        let plain = try loader().load(text: "").get().proxy.clientLimits
        #expect(plain.rules.isEmpty && plain.maxConnectionsPerClient == nil && !plain.dryRun)
    }

    @Test(arguments: [
        ("rate_limits: [{ name: a }]", "rate_limits[0].rate: is required (like 20/s)"),
        ("rate_limits: [{ rate: 10/d }]", "rate_limits[0].rate: '10/d' is not a rate like 20/s, 600/m or 10000/h"),
        ("rate_limits: [{ rate: 10/s, burst: 0 }]", "rate_limits[0].burst:"),
        ("rate_limits: [{ rate: 10/s, clients: 100 }]", "rate_limits[0].clients: '100' is not a whole number from 1024 to 16777216"),
        ("rate_limits: [{ rate: 10/s, paths: [/a/../b] }]", "rate_limits[0].paths: '/a/../b'"),
        ("rate_limits: [{ rate: 10/s, per: ip }]", "rate_limits[0].per: unknown key"),
        ("rate_limits: [{ name: a, rate: 1/s }, { name: a, rate: 2/s }]", "rate_limits[1].name: 'a' names another rule too"),
        ("rate_limits: [{ name: \"a\\\"b\", rate: 1/s }]", "rate_limits[0].name: must be 1 to 64 printable ASCII"),
        ("rate_limits: { rate: 1/s }", "rate_limits: must be a list of { name, paths, rate, burst }"),
        ("limits: { max_connections_per_client: -1 }", "limits.max_connections_per_client: '-1' is not a number of connections"),
        ("limits: { exempt_clients: [example.com] }", "limits.exempt_clients: 'example.com' is not an address or CIDR range"),
    ])
    func perClientLimitMistakesAreNamed(line: String, problem: String) {
        let found = problems(line)
        #expect(found.contains { $0.hasPrefix(problem) }, "\(found)")
    }

    @Test func clientAccessRulesLoad() throws {
        let rules = try loader().load(text: """
        client_access:
          - { name: admin, paths: [/admin, /sidekiq], allow: [10.0.0.0/8, "2001:db8::/32"], deny: [10.9.0.0/16] }
          - { deny: [all] , paths: [/internal] }
        """).get().proxy.clientAccess
        #expect(rules.map(\.name) == ["admin", "client_access[1]"])
        #expect(rules[0].paths.map(\.description) == ["/admin", "/sidekiq"])
        #expect(rules[0].allow == [CIDR.parse("10.0.0.0/8")!, CIDR.parse("2001:db8::/32")!])
        #expect(rules[0].deny == [CIDR.parse("10.9.0.0/16")!])
        // `all` is every IPv4 and every IPv6 address.
        #expect(rules[1].deny == [CIDR.parse("0.0.0.0/0")!, CIDR.parse("::/0")!] && rules[1].allow.isEmpty)
        #expect(try loader().load(text: "").get().proxy.clientAccess.isEmpty)
    }

    @Test(arguments: [
        ("client_access: [{ name: a, paths: [/a] }]", "client_access[0]: needs allow, deny or both"),
        ("client_access: [{ allow: [example.com] }]", "client_access[0].allow: 'example.com' is not an address, a CIDR range or all"),
        ("client_access: [{ deny: [10.0.0.0/33] }]", "client_access[0].deny: '10.0.0.0/33'"),
        ("client_access: [{ allow: [] }]", "client_access[0].allow: is empty"),
        ("client_access: [{ allow: [all], paths: [/a/../b] }]", "client_access[0].paths: '/a/../b'"),
        ("client_access: [{ allow: [all], from: x }]", "client_access[0].from: unknown key"),
        ("client_access: [{ name: a, deny: [all] }, { name: a, deny: [all] }]", "client_access[1].name: 'a' names another rule too"),
        ("client_access: { deny: [all] }", "client_access: must be a list of { name, paths, allow, deny }"),
    ])
    func clientAccessMistakesAreNamed(line: String, problem: String) {
        let found = problems(line)
        #expect(found.contains { $0.hasPrefix(problem) }, "\(found)")
    }

    @Test func accelRedirectLocationsLoad() throws {
        let a = try loader().load(text: """
        x_accel_redirect:
          - { location: /_files/, root: /tmp }
          - { location: /_exports, root: / }
        """).get().proxy.accelRedirect
        #expect(a.locations.map(\.prefix.description) == ["/_files", "/_exports"])
        #expect(a.locations.map(\.root) == ["/tmp", "/"])
        #expect(try loader().load(text: "").get().proxy.accelRedirect.isEnabled == false)
    }

    @Test(arguments: [
        ("x_accel_redirect: [{ root: /tmp }]", "x_accel_redirect[0].location: is required"),
        ("x_accel_redirect: [{ location: /_files }]", "x_accel_redirect[0].root: is required"),
        ("x_accel_redirect: [{ location: _files, root: /tmp }]", "x_accel_redirect[0].location: '_files' must start with /"),
        ("x_accel_redirect: [{ location: /a/../b, root: /tmp }]", "x_accel_redirect[0].location: '/a/../b'"),
        ("x_accel_redirect: [{ location: /, root: /tmp }]", "x_accel_redirect[0].location: '/' would make every path internal"),
        ("x_accel_redirect: [{ location: /_f, root: /tmp }, { location: /_f/, root: /tmp }]",
         "x_accel_redirect[1].location: '/_f' is listed twice"),
        ("x_accel_redirect: [{ location: /_f, root: tmp }]", "x_accel_redirect[0].root: 'tmp' is not an absolute path"),
        ("x_accel_redirect: [{ location: /_f, root: /no/such/dir }]", "x_accel_redirect[0].root: cannot open"),
        ("x_accel_redirect: [{ location: /_f, root: \"/tmp/a,b\" }]", "x_accel_redirect[0].root: '/tmp/a,b' holds ','"),
        ("x_accel_redirect: [{ location: /_f, root: /tmp, internal: true }]", "x_accel_redirect[0].internal: unknown key"),
        ("x_accel_redirect: { location: /_f, root: /tmp }", "x_accel_redirect: must be a list of { location, root }"),
    ])
    func accelRedirectMistakesAreNamed(line: String, problem: String) {
        let found = problems(line)
        #expect(found.contains { $0.hasPrefix(problem) }, "\(found)")
    }

    @Test func maintenanceLoads() throws {
        let m = try loader().load(text: """
        maintenance: { file: /srv/app/public/system/maintenance.html, allow_paths: [/up], allow_clients: [10.0.0.0/8], retry_after: 2m }
        """).get().proxy.maintenance
        #expect(m.file == "/srv/app/public/system/maintenance.html")
        #expect(m.allowPaths.map(\.description) == ["/up"] && m.allowClients == [CIDR.parse("10.0.0.0/8")!])
        #expect(m.retryAfterSeconds == 120)
        #expect(try loader().load(text: "").get().proxy.maintenance.file == nil)
    }

    @Test(arguments: [
        ("maintenance: { file: public/system/maintenance.html }", "maintenance.file: 'public/system/maintenance.html' must be an absolute path"),
        ("maintenance: { allow_paths: [/up] }", "maintenance.file: is required"),
        ("maintenance: { file: /m.html, allow_paths: [up] }", "maintenance.allow_paths: 'up'"),
        ("maintenance: { file: /m.html, allow_clients: [office] }", "maintenance.allow_clients: 'office' is not an address or CIDR range"),
        ("maintenance: { file: /m.html, retry_after: 0s }", "maintenance.retry_after: '0s' is not a duration from 1s to 1d"),
        ("maintenance: { file: /m.html, page: x }", "maintenance.page: unknown key"),
    ])
    func maintenanceMistakesAreNamed(line: String, problem: String) {
        let found = problems(line)
        #expect(found.contains { $0.hasPrefix(problem) }, "\(found)")
    }

    @Test func bufferingLoadsAndItsBoundsAreNamed() throws {
        let b = try loader().load(text: "buffering: { responses: 8m, max_memory: 128m }").get().proxy.buffering
        #expect(b.responses == 8 << 20 && b.maxMemory == 128 << 20 && b.isEnabled)
        #expect(!(try loader().load(text: "").get().proxy.buffering.isEnabled))
        #expect(problems("buffering: { responses: 100m }") == [
            "buffering.responses: is more than buffering.max_memory (67108864 bytes): not one body could be read ahead"])
        #expect(problems("buffering: { max_memory: 10k }").first?.hasPrefix("buffering.max_memory: '10k' is not a size from 1m") == true)
    }

    @Test func spliceLoadsAndItsBoundsAreNamed() throws {
        let d = try loader().load(text: "").get().proxy.splice
        #expect(d.enabled && d.minSize == 16 << 10 && d.maxPipes == 256, "on by default")
        let s = try loader().load(text: "splice: { enabled: false, min_size: 1m, max_pipes: 16 }").get().proxy.splice
        #expect(!s.enabled && s.minSize == 1 << 20 && s.maxPipes == 16)
        #expect(problems("splice: { min_size: 1k }").first?.hasPrefix("splice.min_size: '1k' is not a size from 4k to 1g") == true)
        #expect(problems("splice: { max_pipes: 0 }").first?.hasPrefix("splice.max_pipes:") == true)
        #expect(problems("splice: { pipes: 4 }").first?.contains("splice.pipes") == true, "\(problems("splice: { pipes: 4 }"))")
    }

    @Test func severalUpstreamServersAndTheirHealthLoad() throws {
        let c = try loader().load(text: """
        upstreams: [{ url: http://10.0.0.5:3000, weight: 3 }, { url: "http://app-2:3000" }, { url: "unix:/run/app.sock", backup: true }]
        upstream_health: { max_fails: 2, fail_timeout: 30s, fail_statuses: [500, 503], check_path: /up, check_interval: 10s, check_timeout: 500ms, check_status: 200 }
        """).get()
        let s = c.proxy.upstreamServers
        #expect(s.map(\.weight) == [3, 1, 1] && s.map(\.backup) == [false, false, true])
        #expect(c.upstream == s[0].target && c.proxy.servers == s)
        let h = c.proxy.upstreamHealth
        #expect(h.maxFails == 2 && h.failTimeout == 30_000_000_000 && h.failStatuses == [500, 503])
        #expect(h.checkPath == "/up" && h.checkInterval == 10_000_000_000 && h.checkTimeout == 500_000_000 && h.checkStatuses == 200...200)
        // One `upstream`: one server, weight 1, default health (no checks).
        let one = try loader().load(text: "upstream: http://127.0.0.1:3000").get()
        #expect(one.proxy.upstreamServers.isEmpty && one.upstream != nil)
        #expect(one.proxy.upstreamHealth == UpstreamHealthSettings())
    }

    @Test(arguments: [
        ("upstream: http://a:1\nupstreams: [{ url: http://b:1 }]", "upstreams: give either upstream (one server) or upstreams (several), not both"),
        ("upstreams: []", "upstreams: must be a list of { url, weight, backup } with at least one server"),
        ("upstreams: [{ weight: 2 }]", "upstreams[0].url: is required"),
        ("upstreams: [{ url: ftp://x }]", "upstreams[0].url: 'ftp://x' is not"),
        ("upstreams: [{ url: http://a:1, weight: 101 }]", "upstreams[0].weight:"),
        ("upstreams: [{ url: http://a:1, backup: true }]", "upstreams: every server is a backup"),
        ("upstream_health: { check_status: 200-100 }", "upstream_health.check_status: '200-100' is not a status or a range"),
        ("upstream_health: { fail_statuses: [200] }", "upstream_health.fail_statuses: '200' is not a status from 400 to 599"),
        ("upstream_health: { check_path: up }", "upstream_health.check_path: 'up' must start with /"),
        ("upstream_health: { check_interval: 10ms }", "upstream_health.check_interval: '10ms' is not a duration from 1s to 1h"),
    ])
    func upstreamMistakesAreNamed(line: String, problem: String) {
        let found = problems(line)
        #expect(found.contains { $0.hasPrefix(problem) }, "\(found)")
    }

    @Test func aHeaderRuleCannotChangeTheIdentityHeadersSessionModeSets() {
        let found = problems("""
        headers: { request: { set: { X-WEBAUTH-USER: admin, X-Env: prod } } }
        oauth:
          session:
            secret_env: SESSION_SECRET
            allow_any_authenticated_user: true
            headers: { user: X-WEBAUTH-USER }
        """ + "\n" + Self.sessionProvider)
        #expect(found == ["headers.request: 'X-WEBAUTH-USER' is an identity header session mode sets (oauth.session.headers): a rule cannot change it"])
    }

    @Test func aCookieDomainLoadsWithTheHostsUnderIt() throws {
        let c = try loader().load(text: """
        oauth:
          session:
            secret_env: SESSION_SECRET
            allow_any_authenticated_user: true
            cookie_domain: .Example.COM
            allowed_redirect_hosts: [.example.com, app.example.com, "https://example.com:8443"]
            web_redirect_uri: https://auth.example.com/_oauth/web_callback
        """ + "\n" + Self.sessionProvider).get()
        #expect(c.oauth.session?.cookieDomain == "example.com")
        #expect(c.oauth.session?.revocation == false, "revocation is off unless asked for")
        #expect(c.oauth.session?.cookiePrefix == "__Secure-")
    }

    @Test func aCookieDomainMustCoverTheListenersTLSNames() {
        let p = problems("""
        tls: { cert: /keys/c.pem, key: /keys/k.pem, sni: [{ names: ["*.example.com", www.example.org], cert: /keys/c.pem, key: /keys/k.pem }] }
        oauth: { session: { secret_env: SESSION_SECRET, allow_any_authenticated_user: true, cookie_domain: example.com } }
        """ + "\n" + Self.sessionProvider)
        #expect(p == ["oauth.session.cookie_domain: 'example.com' does not cover tls.sni name 'www.example.org': a sign-in there could never keep its session"], "\(p)")
    }

    @Test func extraJWTIssuersLoadInOrder() throws {
        let c = try loader().load(text: """
        oauth:
          session:
            secret_env: SESSION_SECRET
            allow_any_authenticated_user: true
            extra_jwt_issuers:
              - { issuer: https://login.partner.example/tenant, audiences: [api://orders, orders], jwks_uri: https://keys.partner.example/jwks }
              - { issuer: "http://127.0.0.1:8443", audiences: [svc] }
        """ + "\n" + Self.sessionProvider).get()
        let extra = try #require(c.oauth.session?.extraJWTIssuers)
        #expect(extra == [.init(issuer: "https://login.partner.example/tenant", audiences: ["api://orders", "orders"],
                                jwksURI: "https://keys.partner.example/jwks"),
                          .init(issuer: "http://127.0.0.1:8443", audiences: ["svc"])])
    }

    @Test func headerNamesAndTheUserClaimLoad() throws {
        let c = try loader().load(text: """
        oauth:
          session:
            secret_env: SESSION_SECRET
            allow_any_authenticated_user: true
            headers: { user: X-WEBAUTH-USER, user_claim: preferred_username, email: X-WEBAUTH-EMAIL }
        """ + "\n" + Self.sessionProvider).get()
        let h = try #require(c.oauth.session?.headers)
        #expect(h.user == "X-WEBAUTH-USER" && h.email == "X-WEBAUTH-EMAIL" && h.userClaim == .preferredUsername)
        #expect(h.groups == "X-Forwarded-Groups", "unset names keep oauth2-proxy's")
    }

    @Test(arguments: [
        ("allowed_groups: [x], allowed_email_domains: [exämple.com]", "oauth.session.allowed_email_domains: 'exämple.com' is not a domain or .domain (write internationalized names as xn-- A-labels)"),
        ("allowed_groups: [x], allowed_email_domains: [\"*.example.com\"]", "oauth.session.allowed_email_domains: '*.example.com' is not a domain"),
        ("allowed_groups: [x], allowed_emails: [alice]", "oauth.session.allowed_emails: 'alice' is not an email address with an ASCII domain"),
        ("allowed_groups: [x], allowed_emails: [a@b@example.com]", "oauth.session.allowed_emails: 'a@b@example.com' is not an email address"),
        ("allow_any_authenticated_user: true, allowed_groups: [x]", "oauth.session.allow_any_authenticated_user: lets everyone in, so it cannot stand next to allowed_… rules"),
        ("allowed_groups: [x], path_rules: [{ prefix: /admin }]", "oauth.session.path_rules[0]: needs a rule"),
        ("allowed_groups: [x], path_rules: [{ prefix: /%61dmin, allowed_groups: [y] }]", "oauth.session.path_rules[0].prefix: '/%61dmin' is not in canonical form"),
        ("allowed_groups: [x], groups_claim: a..b", "oauth.session.groups_claim: must be a claim name"),
        ("allowed_groups: [x], headers: { user: Cookie }", "oauth.session.headers.user: 'Cookie' is a header the proxy or HTTP itself uses"),
        ("allowed_groups: [x], headers: { email: X-Forwarded-For }", "oauth.session.headers.email: 'X-Forwarded-For' is a header the proxy"),
        ("allowed_groups: [x], headers: { user: \"X User\" }", "oauth.session.headers.user: 'X User' is not a header name"),
        ("allowed_groups: [x], headers: { user: X-A, email: x-a }", "oauth.session.headers.email: 'x-a' is already headers.user"),
        ("allowed_groups: [x], headers: { user_claim: \"ext..login\" }", "oauth.session.headers.user_claim:"),
        ("allowed_groups: [x], bearer_tokens: [nobody]", "oauth.session.bearer_tokens: 'nobody' is not a configured provider"),
        ("allowed_groups: [x], cookie_domain: com", "oauth.session.cookie_domain: 'com' is not a domain with at least two labels"),
        ("allowed_groups: [x], cookie_domain: \"*.example.com\"", "oauth.session.cookie_domain: '*.example.com' is not a domain"),
        ("allowed_groups: [x], cookie_domain: .example.com, allowed_redirect_hosts: [.example.com, app.example.org]",
         "oauth.session.allowed_redirect_hosts: 'app.example.org' is not under cookie_domain 'example.com'"),
        ("allowed_groups: [x], cookie_domain: .example.com, allowed_redirect_hosts: [\"*.ample.com\"]",
         "oauth.session.allowed_redirect_hosts: '*.ample.com' is not under cookie_domain 'example.com'"),
        ("allowed_groups: [x], cookie_domain: .example.com, web_redirect_uri: https://auth.example.org/_oauth/web_callback",
         "oauth.session.cookie_domain: 'example.com' does not cover web_redirect_uri's host 'auth.example.org'"),
        ("allowed_groups: [x], extra_jwt_issuers: [{ audiences: [a] }]", "oauth.session.extra_jwt_issuers[0].issuer: is required"),
        ("allowed_groups: [x], extra_jwt_issuers: [{ issuer: http://partner.example, audiences: [a] }]",
         "oauth.session.extra_jwt_issuers[0].issuer: must be an https:// URL"),
        ("allowed_groups: [x], extra_jwt_issuers: [{ issuer: https://partner.example }]",
         "oauth.session.extra_jwt_issuers[0].audiences: needs at least one audience"),
        ("allowed_groups: [x], extra_jwt_issuers: [{ issuer: https://p.example, audiences: [a], jwks_uri: http://p.example/k }]",
         "oauth.session.extra_jwt_issuers[0].jwks_uri: must be an https:// URL"),
        ("allowed_groups: [x], extra_jwt_issuers: [{ issuer: https://p.example, audiences: [a] }, { issuer: https://p.example, audiences: [b] }]",
         "oauth.session.extra_jwt_issuers[1].issuer: 'https://p.example' is listed twice"),
        ("allowed_groups: [x], extra_jwt_issuers: [{ issuer: https://p.example, audiences: [a], jwks: https://p.example/k }]",
         "oauth.session.extra_jwt_issuers[0].jwks:"),
        ("allowed_groups: [x], extra_jwt_issuers: { issuer: https://p.example }", "oauth.session.extra_jwt_issuers: must be a list"),
        ("allowed_groups: [x], jwt_assertion: { issuer: me }", "oauth.session.jwt_assertion.signing_key_env: is required (or signing_key_file)"),
        ("allowed_groups: [x], jwt_assertion: { signing_key_file: /keys/apple.p8 }",
         "oauth.session.jwt_assertion.signing_key_file: must be a P-256 (prime256v1) private key in PEM"),
        ("allowed_groups: [x], jwt_assertion: { signing_key_file: /keys/assertion.pem, header: X-Forwarded-User }",
         "oauth.session.jwt_assertion.header: 'X-Forwarded-User' is already one of oauth.session.headers"),
        ("allowed_groups: [x], jwt_assertion: { signing_key_file: /keys/assertion.pem, header: Authorization }",
         "oauth.session.jwt_assertion.header: 'Authorization' is a header the proxy or HTTP itself uses"),
        ("allowed_groups: [x], jwt_assertion: { signing_key_file: /keys/assertion.pem, lifetime: 2h }",
         "oauth.session.jwt_assertion.lifetime:"),
    ])
    func sessionMistakesAreNamed(_ line: String, _ expected: String) {
        let p = problems("oauth: { session: { secret_env: SESSION_SECRET, \(line) } }\n" + Self.sessionProvider)
        #expect(p.count == 1 && p[0].hasPrefix(expected), "\(p)")
    }

    @Test func theJWTAssertionLoadsWithItsKeyAndHeader() throws {
        let c = try loader().load(text: """
        oauth:
          session:
            secret_env: SESSION_SECRET
            allow_any_authenticated_user: true
            jwt_assertion: { signing_key_file: /keys/assertion.pem, header: X-WEBAUTH-JWT, audience: grafana, lifetime: 30s }
        """ + "\n" + Self.sessionProvider).get()
        let s = try #require(c.oauth.session)
        let a = try #require(s.jwtAssertion)
        #expect(s.headers.jwtAssertion == "X-WEBAUTH-JWT")
        #expect(a.audience == "grafana" && a.issuer == "callback-proxy" && a.lifetimeSeconds == 30 && a.previousKeyPEMs.isEmpty)
        #expect(a.signingKeyPEM.value.contains("BEGIN PRIVATE KEY"))
    }

    @Test func relayNeedsTheAppCallbackAndTheAppClient() {
        let p = problems("""
        providers:
          google:
            native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
        """)
        #expect(p == ["providers.google.app_callback: is required for handoff relay",
                      "providers.google.app_client: is required for handoff relay (it authenticates the app at the relay token endpoint)"])
    }

    @Test func providersSharingAnAppClientIDMustShareATokenEndpoint() {
        func config(_ secondEndpoints: String) -> String {
            """
            providers:
              google:
                app_callback: /cb
                app_client: { id: shared-web, secret_env: GOOGLE_WEB_SECRET }
                native: { ios: { client_id: 1-a.apps.googleusercontent.com } }
              corp:
                kind: oidc
                app_callback: /cb2
                app_client: { id: shared-web, secret_env: GOOGLE_WEB_SECRET }
                endpoints: \(secondEndpoints)
                native: { ios: { client_id: corp-ios, redirect_uri: "com.example:/cb" } }
            """
        }
        let p = problems(config("{ issuer: https://id.example.com }"))
        #expect(p.count == 1)
        #expect(p.first?.hasPrefix("providers.google.app_client.id: is also providers.corp.app_client.id, whose token endpoint differs") == true)
        #expect(p.first?.contains("https://oauth2.googleapis.com/token") == true)
        #expect(p.first?.contains("discovered from https://id.example.com/.well-known/openid-configuration") == true)
        // The same token endpoint (a second entry for one project) is not ambiguous.
        #expect(problems(config("{ issuer: https://id.example.com, token: https://oauth2.googleapis.com/token }")) == [])
    }

    @Test func anEmptyFileGivesTheEmbeddedDefaults() throws {
        let c = try loader().load(text: "").get()
        #expect(c.listen.map(\.description) == ["127.0.0.1:8080"])
        #expect(c.internalListen?.description == "127.0.0.1:8081")
        #expect(c.proxy.maxBodySize == 100 << 20)
        #expect(c.store == .memory(maxBytes: 128 << 20))
    }

    @Test(arguments: [("10s", UInt64(10_000_000_000)), ("250ms", 250_000_000), ("2m", 120_000_000_000), ("1h", 3_600_000_000_000)])
    func durationsParse(text: String, nanos: UInt64) { #expect(Units.duration(text) == nanos) }

    @Test(arguments: ["", "10", "s", "-1s", "1.5s", "0s", "10 s"])
    func badDurationsAreRefused(text: String) { #expect(Units.duration(text) == nil) }

    @Test(arguments: [("4096", UInt64(4096)), ("512k", 512 << 10), ("100M", 100 << 20), ("2g", 2 << 30), ("0", 0)])
    func sizesParse(text: String, bytes: UInt64) { #expect(Units.size(text) == bytes) }

    @Test(arguments: ["", "k", "1.5m", "-1", "1t", "99999999999999999999g"])
    func badSizesAreRefused(text: String) { #expect(Units.size(text) == nil) }
}
