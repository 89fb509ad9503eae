import Testing
@testable import ProxyCore

@Suite struct MetricsRegistryTests {
    @Test func countersRenderWithHelpTypeAndSortedSeries() {
        let registry = MetricsRegistry()
        let family = registry.counter("demo_total", "Demo things.", labels: ["kind", "class"])
        family.labels("b", "2xx").increment(by: 3)
        family.labels("a", "5xx").increment()
        #expect(registry.render() == """
            # HELP demo_total Demo things.
            # TYPE demo_total counter
            demo_total{kind="a",class="5xx"} 1
            demo_total{kind="b",class="2xx"} 3

            """)
    }

    @Test func theSameLabelValuesGiveTheSameSeries() {
        let family = MetricsRegistry().counter("x_total", "x", labels: ["p"])
        family.labels("g").increment()
        family.labels("g").increment()
        #expect(family.labels("g").current == 2)
    }

    @Test func retainedSeriesStayAndTheOthersAreNoLongerRendered() {
        let registry = MetricsRegistry()
        let up = registry.gauge("up", "Up.", labels: ["provider"])
        up.labels("corp").set(1)
        up.labels("gone").set(0)
        up.retainSeries { $0 == ["corp"] }
        #expect(registry.render() == "# HELP up Up.\n# TYPE up gauge\nup{provider=\"corp\"} 1\n")
        // a series asked for again starts at zero, as a new one does
        #expect(up.labels("gone").current == 0)
    }

    @Test func histogramBucketsAreCumulativeAndIncludeInfinity() {
        let registry = MetricsRegistry()
        let h = registry.histogram("lat_seconds", "Latency.", bounds: [0.01, 0.1, 1]).labels()
        h.observe(nanos: 5_000_000)      // 5 ms → le=0.01
        h.observe(nanos: 10_000_000)     // exactly on a bound → that bucket (le is inclusive)
        h.observe(nanos: 50_000_000)     // 50 ms → le=0.1
        h.observe(seconds: 3)            // beyond the last bound → +Inf only
        #expect(registry.render() == """
            # HELP lat_seconds Latency.
            # TYPE lat_seconds histogram
            lat_seconds_bucket{le="0.01"} 2
            lat_seconds_bucket{le="0.1"} 3
            lat_seconds_bucket{le="1"} 3
            lat_seconds_bucket{le="+Inf"} 4
            lat_seconds_sum 3.065
            lat_seconds_count 4

            """)
    }

    @Test func labelValuesAreEscaped() {
        let registry = MetricsRegistry()
        registry.gauge("g", "A gauge.", labels: ["v": "a\"b\\c\nd"]) { 1.5 }
        #expect(registry.render().contains(#"g{v="a\"b\\c\nd"} 1.5"#))
    }

    @Test func gaugesGoUpAndDown() {
        let registry = MetricsRegistry()
        let g = registry.gauge("open", "Open.", labels: ["listener"]).labels("public")
        g.increment(); g.increment(); g.decrement()
        #expect(registry.render().contains(#"open{listener="public"} 1"#))
    }

    @Test func engineCountsOnlyResponsesThatWereSent() {
        let registry = MetricsRegistry()
        let engine = EngineMetrics(registry: registry)
        engine.request(.proxied, status: 204)
        engine.request(.callback, status: 302)
        engine.request(.local, status: 0)    // the peer went away before any status
        engine.request(.local, status: 600)  // not an HTTP status class
        let text = registry.render()
        #expect(text.contains(#"callback_proxy_requests_total{route="proxied",code_class="2xx"} 1"#))
        #expect(text.contains(#"callback_proxy_requests_total{route="callback",code_class="3xx"} 1"#))
        #expect(!text.contains(#"route="local",code_class="1xx"} 1"#))
        #expect(!text.contains("6xx"))
    }
}
