import ProxyCore
import Testing
@testable import ProxyConfiguration

/// `http3:`: its defaults, every key read, every bound refused with the key named.
@Suite struct ConfigLoaderHTTP3Tests {
    let base = ConfigLoaderTests()
    let upstream = "upstream: http://127.0.0.1:3000\n"

    @Test func offByDefaultWithTheSettingsDefaults() throws {
        let h = try base.loader().load(text: upstream).get().proxy.http3
        #expect(h == HTTP3Settings())
        #expect(!h.enabled && h.maxStreams == 100)
        #expect(h.streamWindow == 256 << 10 && h.connectionWindow == 1 << 20)
        #expect(h.idleTimeout == 30 * Timeouts.second)
        #expect(h.retry == QUICRetryPolicy(mode: .aboveHandshakes(512)))
        #expect(h.altSvcMaxAge == 86_400)
        #expect(h.glitchBurst == 1000 && h.glitchesPerSecond == 100)
        #expect(!h.earlyData)
        // An empty section changes nothing either.
        #expect(try base.loader().load(text: upstream + "http3: {}\n").get().proxy.http3 == HTTP3Settings())
    }

    @Test func everyKeyIsRead() throws {
        let h = try base.loader().load(text: upstream + """
            http3: { enabled: true, max_streams: 250, stream_window: 1m, connection_window: 64m, idle_timeout: 90s,
                     retry: auto, retry_above_handshakes: 1000, alt_svc_max_age: 8760h, early_data: true, glitch_burst: 5000,
                     max_glitches_per_second: 400 }
            """).get().proxy.http3
        #expect(h.enabled)
        #expect(h.maxStreams == 250)
        #expect(h.streamWindow == 1 << 20 && h.connectionWindow == 64 << 20)
        #expect(h.idleTimeout == 90 * Timeouts.second)
        #expect(h.retry == QUICRetryPolicy(mode: .aboveHandshakes(1000)))
        #expect(h.altSvcMaxAge == 365 * 86_400)
        #expect(h.glitchBurst == 5000 && h.glitchesPerSecond == 400)
        #expect(h.earlyData)
    }

    @Test func retryAlwaysAsksEveryNewConnection() throws {
        let h = try base.loader().load(text: upstream + "http3: { retry: always }\n").get().proxy.http3
        #expect(h.retry == QUICRetryPolicy(mode: .always))
        // The threshold is for `auto` only.
        let also = try base.loader().load(text: upstream + "http3: { retry: always, retry_above_handshakes: 5 }\n").get()
        #expect(also.proxy.http3.retry == QUICRetryPolicy(mode: .always))
    }

    @Test func theLowestAndHighestValuesAreAccepted() throws {
        let low = try base.loader().load(text: upstream + """
            http3: { max_streams: 1, stream_window: 16k, connection_window: 16k, idle_timeout: 1s, retry_above_handshakes: 1, alt_svc_max_age: 1s,
                     glitch_burst: 100, max_glitches_per_second: 1 }
            """).get().proxy.http3
        #expect(low.maxStreams == 1 && low.streamWindow == 16_384 && low.connectionWindow == 16_384)
        #expect(low.idleTimeout == Timeouts.second && low.retry == QUICRetryPolicy(mode: .aboveHandshakes(1)) && low.altSvcMaxAge == 1)
        #expect(low.glitchBurst == 100 && low.glitchesPerSecond == 1)
        let high = try base.loader().load(text: upstream + """
            http3: { max_streams: 10000, stream_window: 16m, connection_window: 64m, idle_timeout: 10m, retry_above_handshakes: 1000000,
                     glitch_burst: 1000000, max_glitches_per_second: 1000000 }
            """).get().proxy.http3
        #expect(high.maxStreams == 10_000 && high.streamWindow == 16 << 20 && high.connectionWindow == 64 << 20)
        #expect(high.idleTimeout == 600 * Timeouts.second && high.retry == QUICRetryPolicy(mode: .aboveHandshakes(1_000_000)))
        #expect(high.glitchBurst == 1_000_000 && high.glitchesPerSecond == 1_000_000)
    }

    @Test(arguments: [
        ("enabled: yes", "http3.enabled: 'yes' is not true or false"),
        ("early_data: 1", "http3.early_data: '1' is not true or false"),
        ("max_streams: 0", "http3.max_streams: '0' is not a whole number from 1 to 10000"),
        ("max_streams: 10001", "http3.max_streams: '10001' is not a whole number from 1 to 10000"),
        ("stream_window: 8k", "http3.stream_window: '8k' is not a size from 16k to 16m, like 256k"),
        ("stream_window: 17m", "http3.stream_window: '17m' is not a size from 16k to 16m, like 256k"),
        ("connection_window: 16383", "http3.connection_window: '16383' is not a size from 16k to 64m, like 1m"),
        ("connection_window: 65m", "http3.connection_window: '65m' is not a size from 16k to 64m, like 1m"),
        ("idle_timeout: 500ms", "http3.idle_timeout: '500ms' is not a duration from 1s to 10m, like 30s"),
        ("idle_timeout: 11m", "http3.idle_timeout: '11m' is not a duration from 1s to 10m, like 30s"),
        ("idle_timeout: 30", "http3.idle_timeout: '30' is not a duration from 1s to 10m, like 30s"),
        ("retry: sometimes", "http3.retry: 'sometimes' is not auto or always"),
        ("retry_above_handshakes: 0", "http3.retry_above_handshakes: '0' is not a whole number from 1 to 1000000"),
        ("retry_above_handshakes: 1000001", "http3.retry_above_handshakes: '1000001' is not a whole number from 1 to 1000000"),
        ("alt_svc_max_age: 999ms", "http3.alt_svc_max_age: '999ms' is not a duration from 1s to 365 days (8760h), like 24h"),
        ("alt_svc_max_age: 8761h", "http3.alt_svc_max_age: '8761h' is not a duration from 1s to 365 days (8760h), like 24h"),
        ("glitch_burst: 99", "http3.glitch_burst: '99' is not a whole number from 100 to 1000000"),
        ("glitch_burst: 1000001", "http3.glitch_burst: '1000001' is not a whole number from 100 to 1000000"),
        ("max_glitches_per_second: 0", "http3.max_glitches_per_second: '0' is not a whole number from 1 to 1000000"),
        ("max_stream: 10", "http3.max_stream: unknown key"),
    ])
    func aValueOutOfBoundsIsRefusedNamingItsKey(_ entry: String, _ expected: String) {
        #expect(base.problems(upstream + "http3: { \(entry) }\n") == [expected])
    }

    @Test func notAMappingIsRefused() {
        #expect(base.problems(upstream + "http3: true\n") == ["http3: must be a mapping, not a value"])
    }

    @Test func theVariablesSetTheSectionsKeys() throws {
        let env = ["CALLBACK_PROXY_HTTP3__ENABLED": "true", "CALLBACK_PROXY_HTTP3__MAX_STREAMS": "20",
                   "CALLBACK_PROXY_HTTP3__RETRY": "always", "CALLBACK_PROXY_HTTP3__ALT_SVC_MAX_AGE": "1h"]
        let loader = ConfigLoader(environment: env, readFile: { _ in nil })
        let h = try loader.load(text: upstream + "http3: { max_streams: 10, idle_timeout: 5s }\n").get().proxy.http3
        #expect(h.enabled && h.maxStreams == 20 && h.idleTimeout == 5 * Timeouts.second)
        #expect(h.retry == QUICRetryPolicy(mode: .always) && h.altSvcMaxAge == 3_600)
        let bad = ConfigLoader(environment: ["CALLBACK_PROXY_HTTP3__STREAM_WINDOW": "1g"], readFile: { _ in nil })
        guard case .failure(let p) = bad.load(text: upstream) else {
            Issue.record("an out-of-bounds variable was accepted")
            return
        }
        #expect(p.items.map(\.description) == [
            "http3.stream_window (from CALLBACK_PROXY_HTTP3__STREAM_WINDOW): '1g' is not a size from 16k to 16m, like 256k",
        ])
    }
}
