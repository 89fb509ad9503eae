import OAuthCallback
import ProxyCore
import Synchronization

/// `/readyz`: may a load balancer send traffic here? Yes when the listeners are up, the store
/// answers and the upstream accepts a connection; otherwise 503 with what failed, so a probe
/// log says why. (`/healthz` only says the process is alive: a restart does not fix Redis.)
final class Readiness: Sendable {
    /// 0: starting, 1: serving, 2: draining (a load balancer should stop sending new work).
    private let phase = Atomic<Int>(0)
    /// What is checked: replaced by a configuration reload.
    private let targets = Mutex<Targets>(Targets())

    private struct Targets {
        var store: (any Store)?
        /// A `redis+cluster://` store (the same as `store`, unwrapped): every primary is probed.
        var cluster: RedisStore?
        var upstream: UpstreamTarget?
        var resolver: HostResolver?
        /// Several servers, or health checks: their health decides, and each is listed.
        var group: UpstreamGroup?
        /// Every group, the default one first: `upstream_groups` are listed with their servers
        /// and leave the status alone.
        var groups: [UpstreamGroup] = []
    }
    private let timeout: UInt64
    /// Named in the body, never in the status (see ProviderHealth).
    private let providers: ProviderHealth?

    init(timeout: UInt64 = 2_000_000_000, providers: ProviderHealth? = nil) {
        self.timeout = timeout
        self.providers = providers
    }

    func check(store: (any Store)?, cluster: RedisStore? = nil, upstream: UpstreamTarget?, resolver: HostResolver?,
               group: UpstreamGroup? = nil, groups: [UpstreamGroup] = []) {
        targets.withLock {
            $0 = Targets(store: store, cluster: cluster, upstream: upstream, resolver: resolver, group: group, groups: groups)
        }
    }

    /// `/readyz?group=NAME`: ready while the listeners serve and one of the group's servers may
    /// get requests — for a balancer in front that sends only that group's routes here. 404
    /// for a name no group has.
    func groupAnswer(_ name: String, on loop: EventLoop) -> Response {
        let t = targets.withLock { $0 }
        guard let group = t.groups.first(where: { $0.name == name }) else {
            return Response(status: 404, text: "no upstream group named \(name) (upstream_groups)\n", headers: [("Cache-Control", "no-store")])
        }
        var problems: [String: String] = [:]
        switch phase.load(ordering: .acquiring) {
        case 0: problems["listeners"] = "not started"
        case 2: problems["listeners"] = "draining"
        default: break
        }
        let states = group.states(now: loop.nowNanoseconds)
        if !states.contains(where: { $0.problem == nil }) { problems["upstream"] = "no server available" }
        return Self.answer(problems, servers: Dictionary(uniqueKeysWithValues: states.map { ($0.server, $0.problem ?? "up") }))
    }

    /// Called once every listener is bound and the loops run.
    func markListening() { phase.store(1, ordering: .releasing) }

    /// Called when shutdown begins: in-flight requests finish, new ones should go elsewhere.
    func markDraining() { phase.store(2, ordering: .releasing) }

    /// The engine starts a deferred request on the request's loop, synchronously.
    func decision(on loop: EventLoop) -> RequestDecision {
        let readiness = self
        return .deferred { sink in readiness.check(sink, on: loop) }
    }

    private func check(_ sink: ResponseSink, on loop: EventLoop) {
        let t = targets.withLock { $0 }
        var problems: [String: String] = [:]
        switch phase.load(ordering: .acquiring) {
        case 0: problems["listeners"] = "not started"
        case 2: problems["listeners"] = "draining"
        default: break
        }
        checkStore(t.store, cluster: t.cluster, on: loop) { storeProblem in
            if let storeProblem { problems["store"] = storeProblem }
            if let group = t.group {
                // Ready while one server may get requests; each listed with why it is out.
                let states = group.states(now: loop.nowNanoseconds)
                if !states.contains(where: { $0.problem == nil }) { problems["upstream"] = "no server available" }
                let servers = Dictionary(uniqueKeysWithValues: states.map { ($0.server, $0.problem ?? "up") })
                sink.respond(Self.answer(problems, unusableProviders: self.providers?.unusable() ?? [:], servers: servers,
                                         groups: Self.groupStates(t.groups.dropFirst(), on: loop)))
                return
            }
            self.checkUpstream(t.upstream, t.resolver, on: loop) { upstreamProblem in
                if let upstreamProblem { problems["upstream"] = upstreamProblem }
                sink.respond(Self.answer(problems, unusableProviders: self.providers?.unusable() ?? [:],
                                         groups: Self.groupStates(t.groups.dropFirst(), on: loop)))
            }
        }
    }

    private static func groupStates(_ groups: ArraySlice<UpstreamGroup>, on loop: EventLoop) -> [String: [String: String]] {
        var out: [String: [String: String]] = [:]
        for g in groups {
            out[g.name] = Dictionary(uniqueKeysWithValues: g.states(now: loop.nowNanoseconds).map { ($0.server, $0.problem ?? "up") })
        }
        return out
    }

    /// With Cluster, one key's `GET` reaches one primary of several: every primary is
    /// pinged too, and every slot must have one.
    private func checkStore(_ store: (any Store)?, cluster: RedisStore?, on loop: EventLoop, _ done: @escaping (String?) -> Void) {
        guard let store else { return done(nil) }
        store.get(key: "readyz:probe", on: loop) { result in
            if case .failure(let e) = result { return done(e.code.rawValue) }
            guard let cluster else { return done(nil) }
            cluster.probeCluster(on: loop) { error in done(error?.code.rawValue) }
        }
    }

    /// A named upstream: the address its next connection would use is probed (one that failed
    /// lately is passed over, as requests pass it over).
    private func checkUpstream(_ upstream: UpstreamTarget?, _ resolver: HostResolver?, on loop: EventLoop,
                               _ done: @escaping (String?) -> Void) {
        guard let upstream else { return done(nil) }
        guard let address = upstream.address ?? resolver?.address(after: nil, now: loop.nowNanoseconds) else {
            return done(resolver?.problem?.description ?? "no address")
        }
        UpstreamProbe.connect(to: address, on: loop, timeout: timeout, done)
    }

    /// `unusableProviders`: providers whose last probe failed, with the setting to fix. They are
    /// reported but leave the status alone: plain proxying works without any of them.
    /// `groups`: the `upstream_groups`, each with its servers' states (they leave the status
    /// alone: a site whose `/cable` processes are down still serves its pages, and every
    /// instance behind the balancer shares those processes — taking them all out would take
    /// the site down; `?group=` asks about one).
    static func answer(_ problems: [String: String], unusableProviders: [String: String] = [:],
                       servers: [String: String]? = nil, groups: [String: [String: String]] = [:]) -> Response {
        var fields: [String: JSONValue] = ["ready": .bool(problems.isEmpty)]
        if let servers { fields["upstreams"] = .object(servers.mapValues { .string($0) }) }
        if !groups.isEmpty {
            fields["upstream_groups"] = .object(groups.mapValues { .object($0.mapValues { .string($0) }) })
        }
        if !problems.isEmpty { fields["failed"] = .object(problems.mapValues { .string($0) }) }
        if !unusableProviders.isEmpty { fields["providers_unusable"] = .object(unusableProviders.mapValues { .string($0) }) }
        return Response(status: problems.isEmpty ? 200 : 503, headers: [
            ("Content-Type", "application/json"), ("Cache-Control", "no-store"),
        ], body: JSONValue.object(fields).serialized())
    }
}
