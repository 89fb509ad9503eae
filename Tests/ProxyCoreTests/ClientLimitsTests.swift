import Foundation
import Testing
@testable import ProxyCore

@Suite struct ClientLimitsTests {
    static let second: UInt64 = 1_000_000_000

    static func key(_ text: String) -> ClientKey { ClientKey(text: text) }

    // MARK: Rates

    @Test(arguments: [("30/m", 30, 60), ("5/s", 5, 1), ("600/h", 600, 3_600), ("1/m", 1, 60)])
    func ratesParse(text: String, count: Int, period: Int) {
        #expect(RateLimit.parse(text) == RateLimit(count: count, periodSeconds: period))
        #expect(RateLimit.parse(text)?.description == text)
    }

    @Test(arguments: ["", "30", "30/", "/m", "0/m", "-1/m", "30/d", "30/min", "30 /m", "1000001/s", "x/m"])
    func otherRatesAreRefused(text: String) {
        #expect(RateLimit.parse(text) == nil)
    }

    // MARK: Buckets

    @Test func aBurstOfTheLimitPassesThenTheNextWaitsForOneToken() {
        let buckets = RateBuckets(limit: RateLimit(count: 3, periodSeconds: 60))
        let a = Self.key("203.0.113.7")
        let t0: UInt64 = 1_000 * Self.second
        for _ in 0..<3 { #expect(buckets.admit(a, now: t0) == .allowed) }
        // One token per 20 s: the fourth waits 20 s, and only the first refusal is to be logged.
        #expect(buckets.admit(a, now: t0) == .refused(retryAfterSeconds: 20, firstRefusal: true))
        #expect(buckets.admit(a, now: t0 + 5 * Self.second) == .refused(retryAfterSeconds: 15, firstRefusal: false))
        #expect(buckets.admit(a, now: t0 + 20 * Self.second) == .allowed)
        #expect(buckets.admit(a, now: t0 + 20 * Self.second) == .refused(retryAfterSeconds: 20, firstRefusal: true))
        // Other addresses have buckets of their own.
        #expect(buckets.admit(Self.key("198.51.100.1"), now: t0) == .allowed)
    }

    @Test func aBurstSmallerThanTheRateSpreadsTheRequests() {
        // 10/s with a burst of 2: two at once, then one every 100 ms.
        let buckets = RateBuckets(limit: RateLimit(count: 10, periodSeconds: 1), burst: 2)
        let a = Self.key("a")
        let t0: UInt64 = 7 * Self.second
        #expect(buckets.admit(a, now: t0) == .allowed)
        #expect(buckets.admit(a, now: t0) == .allowed)
        #expect(buckets.admit(a, now: t0) == .refused(retryAfterSeconds: 1, firstRefusal: true))
        #expect(buckets.admit(a, now: t0 + 100_000_000) == .allowed)
        #expect(buckets.admit(a, now: t0 + 100_000_000) == .refused(retryAfterSeconds: 1, firstRefusal: true))
    }

    @Test func aBucketRefillsToTheLimitAndNoFurther() {
        let buckets = RateBuckets(limit: RateLimit(count: 2, periodSeconds: 1))
        let a = Self.key("a")
        let t0: UInt64 = 50 * Self.second
        #expect(buckets.admit(a, now: t0) == .allowed)
        #expect(buckets.admit(a, now: t0) == .allowed)
        // An hour idle refills 2 tokens, not 7,200.
        let later = t0 + 3_600 * Self.second
        #expect(buckets.admit(a, now: later) == .allowed)
        #expect(buckets.admit(a, now: later) == .allowed)
        #expect(buckets.admit(a, now: later) == .refused(retryAfterSeconds: 1, firstRefusal: true))
    }

    @Test func aLoopWhoseClockLagsDoesNotBreakTheBucket() {
        let buckets = RateBuckets(limit: RateLimit(count: 1, periodSeconds: 60))
        let a = Self.key("a")
        let t0: UInt64 = 100 * Self.second
        #expect(buckets.admit(a, now: t0) == .allowed)
        #expect(buckets.admit(a, now: t0 - 1_000) == .refused(retryAfterSeconds: 61, firstRefusal: true))
    }

    @Test func aFullWindowLetsNewClientsPassUntrackedAndIdleOnesMakeRoom() {
        // The smallest table (1,024 slots): fill every slot with a limited client.
        let buckets = RateBuckets(limit: RateLimit(count: 1, periodSeconds: 60), clients: 1)
        let t0: UInt64 = 100 * Self.second
        var untracked = 0
        for i in 0..<2_048 where buckets.admit(ClientKey(hash: UInt(i + 1)), now: t0) == .untracked { untracked += 1 }
        #expect(untracked == 1_024)
        #expect(buckets.tracked(now: t0) == 1_024)
        // The limited ones stay limited.
        #expect(buckets.admit(ClientKey(hash: 5), now: t0) == .refused(retryAfterSeconds: 60, firstRefusal: true))
        // A minute on, every bucket is full again and its slot free for a new client.
        #expect(buckets.admit(ClientKey(hash: 99_999), now: t0 + 61 * Self.second) == .allowed)
        #expect(buckets.tracked(now: t0 + 61 * Self.second) == 1)
    }

    @Test func loopsRacingForOneBucketNeverGetMoreThanItsTokens() async {
        // Eight threads, one client, one instant: exactly `burst` requests get through.
        let buckets = RateBuckets(limit: RateLimit(count: 500, periodSeconds: 3_600))
        let a = Self.key("192.0.2.1")
        let now: UInt64 = 10 * Self.second
        let allowed = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<1_000).reduce(0) { n, _ in buckets.admit(a, now: now) == .allowed ? n + 1 : n } }
            }
            return await group.reduce(0, +)
        }
        #expect(allowed == 500)
    }

    // MARK: Keys

    @Test func anIPv6ClientIsKeyedByItsSlash64() {
        #expect(Self.key("2001:db8:1:2::1") == Self.key("2001:db8:1:2:ffff:1:2:3"))
        #expect(Self.key("2001:db8:1:2::1") != Self.key("2001:db8:1:3::1"))
        #expect(Self.key("203.0.113.7") != Self.key("203.0.113.8"))
        #expect(Self.key("::ffff:203.0.113.7") == Self.key("203.0.113.7"))
        #expect(Self.key("unknown") == Self.key("unknown"))
        #expect(Self.key("unknown") != Self.key("203.0.113.7"))
    }

    // MARK: Connections

    @Test func connectionsAreCountedUpToTheCapAndFreedOnClose() {
        let counts = ConnectionCounts(clients: 1)
        let a = Self.key("203.0.113.7"), b = Self.key("203.0.113.8")
        #expect(counts.opened(a, limit: 2) == .counted)
        #expect(counts.opened(a, limit: 2) == .counted)
        #expect(counts.opened(a, limit: 2) == .over(count: 2))
        #expect(counts.opened(b, limit: 2) == .counted)
        #expect(counts.count(a) == 2)
        counts.closed(a)
        #expect(counts.opened(a, limit: 2) == .counted)
        // A dry run counts past the cap, so the numbers it reports stay true.
        #expect(counts.opened(a, limit: 2, force: true) == .over(count: 2))
        #expect(counts.count(a) == 3)
        for _ in 0..<3 { counts.closed(a) }
        #expect(counts.count(a) == 0)
        // Closing more than was opened never goes below zero.
        counts.closed(a)
        #expect(counts.count(a) == 0)
    }

    @Test func racingOpensNeverPassTheCap() async {
        let counts = ConnectionCounts(clients: 1)
        let a = Self.key("198.51.100.9")
        let counted = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<500).reduce(0) { n, _ in counts.opened(a, limit: 300) == .counted ? n + 1 : n } }
            }
            return await group.reduce(0, +)
        }
        #expect(counted == 300)
        #expect(counts.count(a) == 300)
    }

    // MARK: Policy

    static func policy(_ configure: (inout ClientLimitSettings) -> Void, budget: Int = 1_000) -> ClientLimitPolicy? {
        var s = ClientLimitSettings()
        configure(&s)
        return ClientLimitPolicy(s, budget: budget, state: ClientLimits(clients: 1, metrics: ClientLimitMetrics(registry: MetricsRegistry())))
    }

    static func path(_ p: String, _ body: (PathReadings) -> Void) {
        #expect(PathReadings.of(p) { body($0) } != nil, "\(p) is refused")
    }

    @Test func aRuleTracksAsManyClientsAsItsClientsSettingSays_andAChangeGetsFreshBuckets() {
        let state = ClientLimits(clients: 1, metrics: ClientLimitMetrics(registry: MetricsRegistry()))
        var rule = RateRule(name: "all", rate: RateLimit(count: 1, periodSeconds: 60))
        rule.clients = 2_048
        let buckets = state.buckets(for: rule)
        let t0: UInt64 = 100 * Self.second
        var untracked = 0
        for i in 0..<4_096 where buckets.admit(ClientKey(hash: UInt(i + 1)), now: t0) == .untracked { untracked += 1 }
        #expect(untracked == 2_048)
        #expect(buckets.tracked(now: t0) == 2_048)
        // A reload that keeps the rule keeps its buckets (and who is limited); one that resizes
        // the table starts new ones.
        #expect(state.buckets(for: rule) === buckets)
        rule.clients = 4_096
        #expect(state.buckets(for: rule) !== buckets)
        #expect(RateRule(name: "x", rate: RateLimit(count: 1, periodSeconds: 1)).clients == 131_072)
    }

    @Test func aClientNoRuleCouldTrackIsAllowedAndSaidSo_butAnotherRulesRefusalWins() throws {
        let policy = try #require(Self.policy {
            var small = RateRule(name: "small", rate: RateLimit(count: 1_000, periodSeconds: 60))
            small.clients = 1_024
            var strict = RateRule(name: "strict", rate: RateLimit(count: 1, periodSeconds: 60))
            strict.paths = [try! PathPrefix.parse("/login").get()]
            $0.rules = [small, strict]
        })
        var untracked = 0
        Self.path("/") { p in
            for i in 0..<2_048 {
                switch policy.admit(client: ClientKey(hash: UInt(i + 1)), readings: p, now: Self.second) {
                case .untracked(let rule): untracked += 1; #expect(rule.settings.name == "small")
                case .allowed: break
                default: Issue.record("refused")
                }
            }
        }
        #expect(untracked == 1_024)
        // Untracked by `small`, refused by `strict` at its second request: the refusal stands.
        Self.path("/login") { p in
            let client = ClientKey(hash: 2_000)
            _ = policy.admit(client: client, readings: p, now: Self.second)
            guard case .refused(let rule, _) = policy.admit(client: client, readings: p, now: Self.second) else {
                Issue.record("allowed"); return
            }
            #expect(rule.settings.name == "strict")
        }
    }

    @Test func theDefaultCapIsHalfTheBudgetAndZeroTurnsItOff() {
        #expect(Self.policy({ _ in })?.connectionCap == 500)
        #expect(Self.policy({ $0.maxConnectionsPerClient = 0 }) == nil)
        #expect(Self.policy({ $0.maxConnectionsPerClient = 7 })?.connectionCap == 7)
        // No budget (a server started without one, as in tests): no derived cap.
        #expect(Self.policy({ _ in }, budget: .max) == nil)
    }

    @Test func aRuleCountsOnlyRequestsUnderItsPaths() throws {
        let policy = try #require(Self.policy {
            var rule = RateRule(name: "login", rate: RateLimit(count: 1, periodSeconds: 60))
            rule.paths = [try! PathPrefix.parse("/users/sign_in").get()]
            $0.rules = [rule]
        })
        let a = Self.key("a")
        Self.path("/assets/app.css") { p in
            for _ in 0..<5 { guard case .allowed = policy.admit(client: a, readings: p, now: Self.second) else { Issue.record("limited"); return } }
        }
        Self.path("/users/sign_in") { p in
            guard case .allowed = policy.admit(client: a, readings: p, now: Self.second) else { Issue.record("first refused"); return }
            guard case .refused(let rule, 60) = policy.admit(client: a, readings: p, now: Self.second) else {
                Issue.record("second allowed"); return
            }
            #expect(rule.reason == "too many requests: rate_limits 'login' allows 1/m per client, 1 at once")
        }
        // Segment boundaries, as everywhere else.
        Self.path("/users/sign_in_help") { p in
            guard case .allowed = policy.admit(client: a, readings: p, now: Self.second) else { Issue.record("limited"); return }
        }
    }

    @Test(arguments: ["/users/sign_in", "/USERS/Sign_In", "/users/sign_in.json", "/users/sign_in/", "/users/sign_in;x",
                      "/users%2Fsign_in", "/users/sign_in%09", "/users/sign_in%2Ejson"])
    func aRuleCountsEveryReadingOfItsPathsAsProtectDoes(_ path: String) throws {
        // Each spelling reaches the same Rails action, so each must spend the same tokens.
        let policy = try #require(Self.policy {
            var rule = RateRule(name: "login", rate: RateLimit(count: 1, periodSeconds: 60))
            rule.paths = [try! PathPrefix.parse("/users/sign_in").get()]
            $0.rules = [rule]
        })
        let a = Self.key("a")
        Self.path(path) { p in
            guard case .allowed = policy.admit(client: a, readings: p, now: Self.second) else { Issue.record("first refused"); return }
            guard case .refused = policy.admit(client: a, readings: p, now: Self.second) else { Issue.record("\(path) escaped the rule"); return }
        }
    }

    @Test func aDryRunRefusesNothingAndSaysWhatItWouldHave() throws {
        let policy = try #require(Self.policy {
            $0.rules = [RateRule(name: "all", rate: RateLimit(count: 1, periodSeconds: 60))]
            $0.dryRun = true
            $0.maxConnectionsPerClient = 1
        })
        let a = Self.key("a")
        Self.path("/") { p in
            guard case .allowed = policy.admit(client: a, readings: p, now: Self.second) else { Issue.record("first"); return }
            guard case .wouldRefuse(let rule) = policy.admit(client: a, readings: p, now: Self.second) else { Issue.record("second"); return }
            #expect(rule.settings.name == "all")
        }
        var peer = try #require(PeerAddress(text: "203.0.113.7"))
        guard case .allowed = policy.connectionOpened(&peer, trusted: false) else { Issue.record("first connection"); return }
        var again = try #require(PeerAddress(text: "203.0.113.7"))
        guard case .wouldRefuse(1) = policy.connectionOpened(&again, trusted: false) else { Issue.record("second connection"); return }
        #expect(again.countedPerClient)
    }

    @Test func exemptAndTrustedPeersAreNotCounted() throws {
        let policy = try #require(Self.policy {
            $0.maxConnectionsPerClient = 1
            $0.exempt = [CIDR.parse("192.0.2.0/24")!]
        })
        for _ in 0..<3 {
            var office = try #require(PeerAddress(text: "192.0.2.55"))
            guard case .allowed = policy.connectionOpened(&office, trusted: false) else { Issue.record("exempt refused"); return }
            #expect(!office.countedPerClient)
            var balancer = try #require(PeerAddress(text: "10.0.0.2"))
            guard case .allowed = policy.connectionOpened(&balancer, trusted: true) else { Issue.record("trusted refused"); return }
        }
        var other = try #require(PeerAddress(text: "198.51.100.1"))
        guard case .allowed = policy.connectionOpened(&other, trusted: false) else { Issue.record("first"); return }
        #expect(other.countedPerClient)
        var second = try #require(PeerAddress(text: "198.51.100.1"))
        guard case .refused(1) = policy.connectionOpened(&second, trusted: false) else { Issue.record("second allowed"); return }
        #expect(!second.countedPerClient)
    }
}
