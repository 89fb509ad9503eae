import CProxyLinux
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `upstream_health.check_path`: every `check_interval` each server is asked for the path — over
/// TLS for an `https://` server, with the same verification as requests — and is out while its
/// answer's status is not in `check_status` or does not come within `check_timeout`. A passing
/// check brings a server back, also one that passive health took out.
///
/// Each server is checked on a thread of its own (never a loop: a check waits for a server that
/// may be slow, which is the point), so a server that hangs until `check_timeout` delays no
/// other server's verdict — checked one after another, three hanging servers at a 5 s timeout
/// would leave a fourth's failure unnoticed for 15 s. The threads are detached and end at `stop`.
final class HealthChecker: @unchecked Sendable {
    private let group: UpstreamGroup
    private let tls: UpstreamTLSClient?
    private let stopping = Atomic<Bool>(false)
    /// Wakes the thread early when stopping (an eventfd, as `HostResolver`'s).
    private let wake: Int32

    init(group: UpstreamGroup, tls: UpstreamTLSClient?) {
        self.group = group
        self.tls = tls
        wake = eventfd(0, Int32(EFD_CLOEXEC))
    }

    deinit { if wake >= 0 { close(wake) } }

    func start() {
        for i in group.servers.indices {
            do {
                pthread_detach(try startThread { [self] in run(i) })
            } catch {
                group.log.error("cannot start an upstream health-check thread; the server is not checked",
                                ["server": group.servers[i].label, "error": error.description,
                                 "setting": "upstream_health.check_path"])
            }
        }
    }

    func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
    }

    /// Server `i`'s checks: one every `check_interval` from the start of the last (back to back
    /// while a check takes longer), until `stop`.
    private func run(_ i: Int) {
        let settings = group.health
        let s = group.servers[i]
        let tls = group.tls.isEmpty ? tls : group.tls[i]
        while !stopping.load(ordering: .relaxed) {
            let started = EventLoop.monotonicNow()
            let problem = check(s, resolver: group.resolvers[i], tls: tls, settings)
            if stopping.load(ordering: .relaxed) { return }
            record(i, s, problem)
            // Sleeps until the next check, or until `stop` writes to the eventfd (never read:
            // it stays readable, so it wakes every server's thread).
            let took = EventLoop.monotonicNow() - started
            let rest = settings.checkInterval > took ? settings.checkInterval - took : 0
            var p = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, Int32(min(rest / 1_000_000, UInt64(Int32.max))))
        }
    }

    /// A check's outcome: the server comes back, or goes out (logged when that changes).
    private func record(_ i: Int, _ s: UpstreamServerState, _ problem: String?) {
        let wasPassing = s.checkPassed.load(ordering: .relaxed)
        if let problem {
            s.problem.withLock { $0 = "check: \(problem)" }
            s.checkPassed.store(false, ordering: .relaxed)
            group.failed(i, .check, problem, now: EventLoop.monotonicNow(), counts: false)
            if wasPassing {
                group.log.warn("upstream server failed its health check", [
                    "server": s.label, "reason": problem, "setting": "upstream_health (check_path, check_status, check_timeout)",
                ])
            }
        } else {
            s.outUntil.store(0, ordering: .relaxed)
            s.checkPassed.store(true, ordering: .relaxed)
            if !wasPassing {
                s.problem.withLock { $0 = nil }
                group.log.info("upstream server passed its health check: back in", ["server": s.label])
            }
        }
    }

    /// Nil when the server answered the check with an expected status; else why not.
    private func check(_ s: UpstreamServerState, resolver: HostResolver?, tls: UpstreamTLSClient?,
                       _ settings: UpstreamHealthSettings) -> String? {
        let target = s.server.target
        guard let address = target.address ?? resolver?.address(after: nil, now: EventLoop.monotonicNow()) else {
            return "no address (\(resolver?.problem?.description ?? "the name has not resolved"))"
        }
        let deadline = EventLoop.monotonicNow() + settings.checkTimeout
        let fd: Int32
        do {
            fd = try Socket.startConnect(address)
        } catch {
            return error.description
        }
        defer { close(fd) }
        guard wait(fd, Int16(POLLOUT), until: deadline) else { return "connect timed out" }
        let err = Socket.pendingError(fd)
        if err != 0 { return SystemError(call: "connect(\(address))", errno: err).description }
        var session: TLSSession? = nil
        if target.tls {
            guard let tls, let made = tls.makeSession(fd: fd) else { return "cannot start TLS" }
            session = made
            while true {
                switch made.handshake() {
                case .done: break
                case .wantRead: if wait(fd, Int16(POLLIN), until: deadline) { continue } else { return "TLS handshake timed out" }
                case .wantWrite: if wait(fd, Int16(POLLOUT), until: deadline) { continue } else { return "TLS handshake timed out" }
                case .failed(let f): return "TLS handshake failed: \(f)"
                }
                break
            }
        }
        let host = target.description.hasPrefix("unix:") ? "localhost" : target.description
        let request = Array("GET \(settings.checkPath ?? "/") HTTP/1.1\r\nHost: \(host)\r\nUser-Agent: callback-proxy-health-check\r\nConnection: close\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let r: IOResult
            do {
                r = try request.withUnsafeBytes { raw throws(SystemError) in
                    let p = raw.baseAddress! + sent
                    return session != nil ? try session!.write(from: p, count: raw.count - sent)
                        : try Socket.write(fd, from: p, count: raw.count - sent)
                }
            } catch {
                return "sending the check failed: \(error)"
            }
            switch r {
            case .done(let n): sent += n
            case .wouldBlock: guard wait(fd, Int16(POLLOUT | POLLIN), until: deadline) else { return "no answer in time" }
            }
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !answer.contains(0x0A) && answer.count < 512 {
            let r: IOResult
            do {
                r = try buffer.withUnsafeMutableBytes { raw throws(SystemError) in
                    session != nil ? try session!.read(into: raw.baseAddress!, count: raw.count)
                        : try Socket.read(fd, into: raw.baseAddress!, count: raw.count)
                }
            } catch {
                return "reading the answer failed: \(error)"
            }
            switch r {
            case .done(0): return answer.isEmpty ? "closed without answering" : "an answer without a status line"
            case .done(let n): answer += buffer[0..<n]
            case .wouldBlock: guard wait(fd, Int16(POLLIN), until: deadline) else { return "no answer in time" }
            }
        }
        // `HTTP/1.1 200 OK`
        let line = String(decoding: answer.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
        let parts = line.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return "not an HTTP answer"
        }
        return settings.checkStatuses.contains(status) ? nil : "answered \(status)"
    }

    /// Waits until `fd` is ready for `events` or `deadline` passes.
    private func wait(_ fd: Int32, _ events: Int16, until deadline: UInt64) -> Bool {
        let now = EventLoop.monotonicNow()
        guard now < deadline else { return false }
        var p = pollfd(fd: fd, events: events, revents: 0)
        let r = poll(&p, 1, Int32(max(1, (deadline - now) / 1_000_000)))
        return r > 0
    }
}
