import ProxyCore
import Testing
@testable import ProxyConfiguration

/// `upstream_groups`, `routes`, `upstream_balance`, `upstream_retry_statuses`.
@Suite struct ConfigLoaderRoutesTests {
    let base = ConfigLoaderTests()

    @Test func groupsAndRoutesLoad() throws {
        let app = try base.loader().load(text: """
        upstream: unix:/run/puma.sock
        upstream_balance: hash header X-Session
        upstream_retry_statuses: [502, 504]
        upstream_groups:
          cable:
            upstreams: [{ url: http://10.0.0.11:8080, weight: 3 }, { url: http://10.0.0.12:8080, backup: true }]
            balance: least_conn
            health: { max_fails: 2, check_path: /health }
            retry_statuses: [503]
            timeouts: { upstream_connect: 1s, upstream: 1h }
          api: { upstream: http://api:3000 }
        routes:
          - { paths: [/cable], upstream_group: cable }
          - { hosts: [API.example.com, "*.api.example.com"], upstream_group: api }
          - { hosts: [www.example.com], paths: [/legacy], upstream_group: default }
        """).get()
        var c = app.proxy
        c.upstream = app.upstream  // as the binary does (Options)
        #expect(c.upstreamBalance == .hash(.header("x-session")))
        #expect(c.upstreamRetryStatuses == [502, 504])
        let groups = c.groupSettings
        #expect(groups.map(\.name) == ["default", "cable", "api"])
        #expect(groups[1].servers.map(\.weight) == [3, 1] && groups[1].servers.map(\.backup) == [false, true])
        #expect(groups[1].balance == .leastConnections && groups[1].retryStatuses == [503])
        #expect(groups[1].health.maxFails == 2 && groups[1].health.checkPath == "/health")
        #expect(groups[1].connectTimeout == 1_000_000_000 && groups[1].responseTimeout == 3_600_000_000_000)
        // A group's own defaults, not the top level's.
        #expect(groups[2].balance == .roundRobin && groups[2].retryStatuses.isEmpty && groups[2].responseTimeout == nil)
        #expect(c.routes.map(\.group) == [1, 2, 0])
        #expect(c.routes[1].hosts == ["api.example.com", "*.api.example.com"])
        #expect(c.routes[0].paths.map(\.description) == ["/cable"])
    }

    @Test(arguments: [
        ("upstream: http://a:1\nroutes: [{ paths: [/x], upstream_group: nope }]", "routes[0].upstream_group: 'nope' is no group"),
        ("upstream: http://a:1\nroutes: [{ upstream_group: default }]", "routes[0]: needs hosts, paths or both"),
        ("upstream: http://a:1\nroutes: [{ paths: [/x] }]", "routes[0].upstream_group: is required"),
        ("upstream: http://a:1\nroutes: [{ hosts: [\"a b\"], upstream_group: default }]", "routes[0].hosts: 'a b' is not a host name"),
        ("upstream: http://a:1\nroutes: [{ paths: [/a/../b], upstream_group: default }]", "routes[0].paths: '/a/../b'"),
        ("upstream: http://a:1\nroutes: { paths: [/x] }", "routes: must be a list"),
        ("upstream: http://a:1\nupstream_groups: { default: { upstream: http://b:1 } }", "upstream_groups.default: 'default' is the top-level"),
        ("upstream: http://a:1\nupstream_groups: { Cable: { upstream: http://b:1 } }", "upstream_groups.Cable: group names are"),
        ("upstream: http://a:1\nupstream_groups: { cable: { balance: least_conn } }", "upstream_groups.cable: needs upstream (one server) or upstreams"),
        ("upstream: http://a:1\nupstream_groups: { cable: { upstream: http://b:1, upstreams: [{ url: http://c:1 }] } }",
         "upstream_groups.cable.upstreams: give either upstream"),
        ("upstream: http://a:1\nupstream_groups: { cable: { upstream: http://b:1, balance: sticky } }",
         "upstream_groups.cable.balance: 'sticky' is not round_robin, least_conn, hash client_address or hash header NAME"),
        ("upstream: http://a:1\nupstream_groups: { cable: { upstreams: [{ url: ftp://b }] } }", "upstream_groups.cable.upstreams[0].url"),
        ("upstream: http://a:1\nupstream_groups: { cable: { upstream: http://b:1, health: { max_fail: 2 } } }",
         "upstream_groups.cable.health.max_fail: unknown key"),
        ("upstream: http://a:1\nupstream_groups: { cable: { upstream: http://b:1, timeouts: { client_body: 1s } } }",
         "upstream_groups.cable.timeouts.client_body: unknown key"),
        ("upstream: http://a:1\nupstream_groups: { cable: { upstream: http://b:1, retry_statuses: [302] } }",
         "upstream_groups.cable.retry_statuses: '302' is not a status from 400 to 599"),
        ("upstreams: [{ url: http://a:1 }, { url: http://a:1, weight: 2 }]", "upstreams[1].url: 'a:1' is listed twice"),
        ("upstream: http://a:1\nupstream_groups: { g: { upstreams: [{ url: http://b:1 }, { url: http://b:1 }] } }",
         "upstream_groups.g.upstreams[1].url: 'b:1' is listed twice"),
        ("upstream: http://a:1\nupstream_retry_statuses: [600]", "upstream_retry_statuses: '600' is not a status"),
        ("upstream: http://a:1\nupstream_balance: hash cookie x", "upstream_balance: 'hash cookie x' is not"),
    ])
    func mistakesAreNamed(text: String, problem: String) {
        let found = base.problems(text)
        #expect(found.contains { $0.hasPrefix(problem) }, "\(found)")
    }
}
