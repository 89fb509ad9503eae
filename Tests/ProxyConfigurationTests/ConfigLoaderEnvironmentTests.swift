import OAuthCallback
import ProxyCore
import Testing
@testable import ProxyConfiguration

@Suite struct ConfigLoaderEnvironmentTests {
    func load(_ text: String, _ env: [String: String]) -> Result<AppConfig, ConfigProblems> {
        ConfigLoader(environment: env, readFile: { $0 == "/run/secrets/redis" ? "from-a-file\n" : nil }).load(text: text)
    }

    func problems(_ text: String, _ env: [String: String]) -> [ConfigProblem] {
        switch load(text, env) {
        case .success: return []
        case .failure(let p): return p.items
        }
    }

    @Test func aVariableReplacesTheFilesValue() throws {
        let c = try load("listen: 127.0.0.1:9000\nupstream: http://127.0.0.1:3000\n",
                         ["CALLBACK_PROXY_UPSTREAM": "http://127.0.0.1:4000"]).get()
        #expect(c.upstream?.description == "127.0.0.1:4000")
        #expect(c.listen.map(\.description) == ["127.0.0.1:9000"])
    }

    @Test func aListKeyTakesCommaSeparatedValues() throws {
        let c = try load("listen: 127.0.0.1:9000\n",
                         ["CALLBACK_PROXY_LISTEN": "127.0.0.1:9100, 127.0.0.1:9101",
                          "CALLBACK_PROXY_TRUSTED_PROXIES": "10.0.0.0/8"]).get()
        #expect(c.listen.map(\.description) == ["127.0.0.1:9100", "127.0.0.1:9101"])
        #expect(c.proxy.trustedProxies.count == 1)
    }

    @Test func aNestedKeyIsJoinedWithTwoUnderscoresAndKeepsItsSiblings() throws {
        let c = try load("timeouts: { upstream: 5s, drain: 3s }\n",
                         ["CALLBACK_PROXY_TIMEOUTS__UPSTREAM": "20s", "CALLBACK_PROXY_LOG__LEVEL": "warn",
                          "CALLBACK_PROXY_OAUTH__REPLAY_WINDOW": "15m"]).get()
        #expect(c.proxy.timeouts.upstreamResponse == 20_000_000_000)
        #expect(c.proxy.timeouts.drain == 3_000_000_000)
        #expect(c.logLevel == .warn)
        #expect(c.oauth.replayWindowSeconds == 900)
    }

    @Test func withoutAFileTheVariablesApplyToTheDefaults() throws {
        let loader = ConfigLoader(environment: ["CALLBACK_PROXY_UPSTREAM": "http://127.0.0.1:4000",
                                                "CALLBACK_PROXY_INTERNAL_LISTEN": "off"], readFile: { _ in nil })
        let c = try loader.load(path: nil).get()
        #expect(c.upstream?.description == "127.0.0.1:4000")
        #expect(c.internalListen == nil)
        #expect(c.listen.map(\.description) == ["127.0.0.1:8080"])
    }

    @Test func aBadValueNamesItsVariable() throws {
        let p = problems("loops: 2\n", ["CALLBACK_PROXY_LOOPS": "zero", "CALLBACK_PROXY_LISTEN": "127.0.0.1:1,nowhere"])
        #expect(p.count == 2, "\(p)")
        let loops = try #require(p.first { $0.path == "loops" })
        #expect(loops.variable == "CALLBACK_PROXY_LOOPS")
        #expect(loops.line == nil)
        #expect(loops.description == "loops (from CALLBACK_PROXY_LOOPS): 'zero' is not a whole number from 1 to 256")
        #expect(p.contains { $0.path == "listen" && $0.variable == "CALLBACK_PROXY_LISTEN" && $0.message.contains("'nowhere'") })
    }

    @Test func anUnknownVariableIsAProblemLikeAnUnknownKey() {
        let p = problems("", ["CALLBACK_PROXY_UPSTRAEM": "http://127.0.0.1:1",
                              "CALLBACK_PROXY_TIMEOUTS_UPSTREAM": "5s",
                              "CALLBACK_PROXY_PROVIDERS__GOOGLE__HANDOFF": "params",
                              "CALLBACK_PROXY_TLS": "on"])
        #expect(p.map(\.variable) == ["CALLBACK_PROXY_PROVIDERS__GOOGLE__HANDOFF", "CALLBACK_PROXY_TLS",
                                      "CALLBACK_PROXY_TIMEOUTS_UPSTREAM", "CALLBACK_PROXY_UPSTRAEM"].sorted(),
                "\(p)")
        #expect(p.allSatisfy { $0.message.hasPrefix("unknown variable") })
        #expect(p.contains { $0.description.hasPrefix("CALLBACK_PROXY_UPSTRAEM: unknown variable") })
        #expect(p.contains { $0.variable == "CALLBACK_PROXY_TIMEOUTS_UPSTREAM" && $0.message.contains("CALLBACK_PROXY_TIMEOUTS__UPSTREAM") })
    }

    @Test func otherVariablesAndSecretsNamedByTheFileAreNotUnknown() throws {
        let text = """
        providers:
          google:
            handoff: relay
            app_callback: /cb
            app_client: { id: web, secret_env: CALLBACK_PROXY_GOOGLE_WEB_SECRET }
            native: { ios: { client_id: 123-ios.apps.googleusercontent.com } }
        """
        let c = try load(text, ["CALLBACK_PROXY_GOOGLE_WEB_SECRET": "s", "CALLBACK_PROXY_REDIS_PASSWORD": "pw",
                                "CALLBACK_PROXY_BIN": "/usr/bin/callback-proxy", "OTHER_PROGRAM_SETTING": "x"]).get()
        #expect(c.oauth.providers["google"]?.appClient?.clientSecret.value == "s")
    }

    @Test func anEmptyVariableIsTreatedAsUnset() throws {
        let c = try load("upstream: http://127.0.0.1:3000\n", ["CALLBACK_PROXY_UPSTREAM": "", "CALLBACK_PROXY_LOOPS": ""]).get()
        #expect(c.upstream?.description == "127.0.0.1:3000")
        #expect(c.loops == nil)
    }

    @Test func aFileMistakeUnderAnOverrideIsStillReported() {
        let p = problems("log: verbose\n", ["CALLBACK_PROXY_LOG__LEVEL": "debug"])
        #expect(p.map(\.description) == ["log (line 1): must be a mapping, not a value"])
    }

    @Test func aMissingKeyNextToAnOverrideHasNoLine() {
        let p = problems("", ["CALLBACK_PROXY_TLS__CERT": "/tls/a.pem"])
        #expect(p.map(\.description) == ["tls.key: is required"])
    }

    // MARK: The store's password

    @Test func theRedisPasswordComesFromTheNamedVariable() throws {
        let c = try load("store: redis://10.0.0.7:6379/0\nstore_password_env: REDIS_PW\n",
                         ["REDIS_PW": "named", "CALLBACK_PROXY_REDIS_PASSWORD": "default"]).get()
        #expect(c.store.redis?.topology == .single(RedisURL(host: "10.0.0.7", port: 6379, database: 0)))
        #expect(c.store.redis?.auth.password?.value == "named")
    }

    @Test func theRedisPasswordComesFromAFile() throws {
        let c = try load("store: redis://10.0.0.7:6379/0\nstore_password_file: /run/secrets/redis\n", [:]).get()
        #expect(c.store.redis?.auth.password?.value == "from-a-file")
    }

    @Test func theRedisPasswordDefaultsToCallbackProxyRedisPassword() throws {
        let c = try load("store: redis://10.0.0.7:6379/0\n", ["CALLBACK_PROXY_REDIS_PASSWORD": "default"]).get()
        #expect(c.store.redis?.auth.password?.value == "default")
        let none = try load("store: redis://10.0.0.7:6379/0\n", [:]).get()
        #expect(none.store.redis != nil && none.store.redis?.auth.password == nil)
    }

    @Test func aPasswordGivenOutsideTheURLReplacesTheOneInIt() throws {
        let inURL = try load("store: redis://app:in-url@10.0.0.7:6379/0\n", [:]).get()
        #expect(inURL.store.redis?.auth == RedisAuth(username: "app", password: Secret("in-url")))
        // The topology keeps no credentials: the two ways of giving a password are one value.
        #expect(inURL.store.redis?.topology == .single(RedisURL(host: "10.0.0.7")))
        let outside = try load("store: redis://app:in-url@10.0.0.7:6379/0\n", ["CALLBACK_PROXY_REDIS_PASSWORD": "outside"]).get()
        #expect(outside.store.redis?.auth == RedisAuth(username: "app", password: Secret("outside")))
    }

    @Test func aLoneNameInTheURLIsTheACLUserWhenThePasswordComesFromOutside() throws {
        let acl = try load("store: redis://proxy@10.0.0.7:6379/0\n", ["CALLBACK_PROXY_REDIS_PASSWORD": "outside"]).get()
        #expect(acl.store.redis?.auth == RedisAuth(username: "proxy", password: Secret("outside")))
        let cluster = try load("store: redis+cluster://pro%78y@10.0.0.7:7000,10.0.0.8:7000\n",
                               ["CALLBACK_PROXY_REDIS_PASSWORD": "outside"]).get()
        #expect(cluster.store.redis?.auth == RedisAuth(username: "proxy", password: Secret("outside")))
        // Without one it is the password, as redis-cli reads it; `:secret@` is always a password.
        let alone = try load("store: redis://secret@10.0.0.7:6379/0\n", [:]).get()
        #expect(alone.store.redis?.auth == RedisAuth(username: nil, password: Secret("secret")))
        let classic = try load("store: redis://:in-url@10.0.0.7:6379/0\n", ["CALLBACK_PROXY_REDIS_PASSWORD": "outside"]).get()
        #expect(classic.store.redis?.auth == RedisAuth(username: nil, password: Secret("outside")))
    }

    /// A reload keeps the running store exactly when the specs are equal.
    @Test func theStoreSpecChangesWithTheStoreSettingsOnly() throws {
        let file = "store: redis+sentinel://10.0.0.1/cbp/0\nstore_sentinel_password_env: S\n"
        let env = ["CALLBACK_PROXY_REDIS_PASSWORD": "pw", "S": "sentinel-pw"]
        let base = try load(file, env).get().store
        #expect(try load(file + "log: { level: debug }\nstore_wait_timeout: 100ms\n", env).get().store == base)
        var other = env
        other["CALLBACK_PROXY_REDIS_PASSWORD"] = "pw2"
        #expect(try load(file, other).get().store != base)
        other = env
        other["S"] = "sentinel-pw2"
        #expect(try load(file, other).get().store != base)
        #expect(try load(file + "store_wait_timeout: 200ms\n", env).get().store != base)
        #expect(try load(file + "store_wait_replicas: 1\n", env).get().store != base)
        #expect(try load("store: redis+sentinel://10.0.0.1/cbp/1\nstore_sentinel_password_env: S\n", env).get().store != base)
    }

    @Test func storePasswordMistakesAreReported() {
        #expect(problems("store: redis://10.0.0.7:6379/0\nstore_password: hunter2\n", [:]).map(\.path) == ["store_password"])
        #expect(problems("store: redis://10.0.0.7:6379/0\nstore_password_env: REDIS_PW\n", [:]).map(\.description)
                == ["store_password_env (line 2): environment variable REDIS_PW is not set"])
        #expect(problems("store: memory\nstore_password_env: REDIS_PW\n", ["REDIS_PW": "x"]).map(\.description)
                == ["store_password_env (line 2): is only used with a redis:// store"])
    }

    @Test func aRedisURLThatCannotStartFailsTheCheck() {
        let p = problems("store: rediss://10.0.0.7:notaport/0\n", [:])
        #expect(p.count == 1 && p[0].path == "store" && p[0].message.contains("port"), "\(p)")
    }

    // MARK: The store's TLS

    func loadWithCA(_ text: String, _ env: [String: String] = [:]) -> Result<AppConfig, ConfigProblems> {
        ConfigLoader(environment: env, readFile: { $0 == "/tls/redis-ca.pem" ? "-----BEGIN CERTIFICATE-----\n" : nil }).load(text: text)
    }

    @Test func aRedissStoreTakesItsCAAndClientCertificate() throws {
        let c = try loadWithCA("""
            store: rediss://redis.internal:6380/1
            store_tls_ca: /tls/redis-ca.pem
            store_tls_client_cert: /tls/client.pem
            store_tls_client_key: /tls/client.key
            """).get()
        #expect(c.store.redis?.topology == .single(RedisURL(host: "redis.internal", port: 6380, database: 1, tls: true)))
        #expect(c.store.redis?.tls == UpstreamTLSSettings(caFile: "/tls/redis-ca.pem", clientCertFile: "/tls/client.pem",
                                                  clientKeyFile: "/tls/client.key"))
        // Without the keys: the system store, no client certificate.
        #expect(try loadWithCA("store: rediss://redis.internal/0\n").get().store.redis?.tls.isDefault == true)
        let fromEnvironment = try loadWithCA("", ["CALLBACK_PROXY_STORE": "rediss://10.0.0.7/0",
                                                  "CALLBACK_PROXY_STORE_TLS_CA": "/tls/redis-ca.pem"]).get()
        #expect(fromEnvironment.store.redis?.tls.caFile == "/tls/redis-ca.pem")
    }

    @Test func storeTLSMistakesAreReportedAtTheirKeys() {
        func problems(_ text: String) -> [String] {
            guard case .failure(let p) = loadWithCA(text) else { return [] }
            return p.items.map(\.description)
        }
        #expect(problems("store: redis://10.0.0.7:6379/0\nstore_tls_ca: /tls/redis-ca.pem\n")
                == ["store_tls_ca (line 2): is only used with a rediss:// (TLS) store"])
        #expect(problems("store_tls_client_cert: /c.pem\nstore_tls_client_key: /c.key\n")
                == ["store_tls_client_cert (line 1): is only used with a rediss:// (TLS) store",
                    "store_tls_client_key (line 2): is only used with a rediss:// (TLS) store"])
        #expect(problems("store: rediss://10.0.0.7/0\nstore_tls_ca: /tls/missing.pem\n")
                == ["store_tls_ca (line 2): cannot read '/tls/missing.pem'"])
        #expect(problems("store: rediss://10.0.0.7/0\nstore_tls_client_cert: /c.pem\n")
                == ["store_tls_client_cert (line 2): needs store_tls_client_key as well"])
    }
}
