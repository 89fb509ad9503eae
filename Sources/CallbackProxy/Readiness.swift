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
    /// get requests — for a balancer in front that sends only that group's routes here; 404 for
    /// a name no group has. A group with one server and no `check_path` has no health to read
    /// (passive health needs two): its server is asked for a connection, as the default group's is.
    func groupDecision(_ query: String, on loop: EventLoop) -> RequestDecision {
        let name = query.split(separator: "&").first { $0.hasPrefix("group=") }.map { String($0.dropFirst(6)) } ?? ""
        let t = targets.withLock { $0 }
        guard let group = t.groups.first(where: { $0.name == name }) else {
            let shown = name.utf8.count <= 64 && name.utf8.allSatisfy { $0 == 0x2D || $0 == 0x5F || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) }
            return .respond(Response(status: 404, text: shown ? "no upstream group named \(name) (upstream_groups)\n" : "no such upstream group\n",
                                     headers: [("Cache-Control", "no-store")]))
        }
        var problems = listenerProblems()
        guard group.isWatched else {
            let listening = problems
            return .deferred { sink in
                self.checkUpstream(group.firstTarget, group.firstResolver, on: loop) { problem in
                    var problems = listening
                    if let problem { problems["upstream"] = problem }
                    sink.respond(Self.answer(problems))
                }
            }
        }
        if !group.anyAvailable(now: loop.nowNanoseconds) { problems["upstream"] = "no server available" }
        return .respond(Self.answer(problems, servers: group.stateMap(now: loop.nowNanoseconds)))
    }

    /// What the listeners' phase says against readiness.
    private func listenerProblems() -> [String: String] {
        switch phase.load(ordering: .acquiring) {
        case 0: return ["listeners": "not started"]
        case 2: return ["listeners": "draining"]
        default: return [:]
        }
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
        var problems = listenerProblems()
        checkStore(t.store, cluster: t.cluster, on: loop) { storeProblem in
            if let storeProblem { problems["store"] = storeProblem }
            if let group = t.group {
                // Ready while one server may get requests; each listed with why it is out.
                if !group.anyAvailable(now: loop.nowNanoseconds) { problems["upstream"] = "no server available" }
                sink.respond(Self.answer(problems, unusableProviders: self.providers?.unusable() ?? [:],
                                         servers: group.stateMap(now: loop.nowNanoseconds),
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

    /// Each `upstream_groups` group's servers and their states; a group with no health to read
    /// (one server, no `check_path`) says so rather than "up".
    private static func groupStates(_ groups: ArraySlice<UpstreamGroup>, on loop: EventLoop) -> [String: [String: String]] {
        var out: [String: [String: String]] = [:]
        for g in groups {
            out[g.name] = g.isWatched ? g.stateMap(now: loop.nowNanoseconds)
                : [g.firstTarget.description: "not checked (one server, no health.check_path: /readyz?group=\(g.name) connects)"]
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
