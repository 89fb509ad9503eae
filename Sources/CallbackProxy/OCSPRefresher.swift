import OAuthCallback
import ProxyCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Keeps each certificate's OCSP response fresh for stapling (`tls.ocsp_stapling`): fetched
/// from the responder its certificate names (libcurl, on a thread of its own — never on a
/// serving loop), checked and stapled by the engine (`OCSPStaple`), and fetched again halfway
/// to its `nextUpdate` (at least every 12 hours, at most every 5 minutes), or a minute after a
/// failure. A failure never blocks a handshake: the last good response stays stapled until its
/// `nextUpdate`, and without one handshakes go on without a staple. Each failure is logged (at
/// most once per certificate per round of retries) and counted; a `revoked` answer is logged at
/// error level and not stapled.
final class OCSPRefresher: Sendable {
    private let thread: EventLoopThread?
    /// Bumped by every `watch`: timers of an older round end quietly.
    private let round = Mutex(0)
    private let fetches: MetricFamily<Counter>
    private let stapled: MetricFamily<Gauge>
    private let log: Logger
    /// Certificate subject → when its last expiry was logged (seconds since the epoch).
    private let lastExpiryLogged = Mutex<[String: Int64]>([:])

    static let minimumInterval: Int64 = 300
    static let maximumInterval: Int64 = 12 * 3600
    static let retryInterval: Int64 = 60
    static let timeout: UInt64 = 10_000_000_000

    init(metrics: MetricsRegistry, log: Logger) {
        self.log = log
        fetches = metrics.counter("callback_proxy_tls_ocsp_fetches_total",
                                  "OCSP responses fetched for stapling, by result.", labels: ["result"])
        stapled = metrics.gauge("callback_proxy_tls_ocsp_stapled",
                                "1 when a good OCSP response is stapled for the certificate, else 0.", labels: ["certificate"])
        var t: EventLoopThread? = nil
        do { t = try EventLoopThread() } catch {
            log.error("cannot start the OCSP thread; certificates are served without a stapled response", ["error": error.description])
        }
        thread = t
    }

    /// Fetches responses for `credentials`' certificates now and keeps them fresh; replaces what
    /// was watched before (a reload's certificates).
    func watch(_ credentials: TLSCredentials?) {
        let current = round.withLock { r -> Int in r += 1; return r }
        let staples = credentials?.ocspStaples ?? []
        stapled.retainSeries { labels in staples.contains { $0.subject == labels[0] } }
        guard let loop = thread?.loop, !staples.isEmpty else { return }
        let http = CurlClient(caFile: nil)
        for staple in staples {
            if let why = staple.unstapleable {
                log.warn("OCSP stapling is not possible for this certificate", [
                    "certificate": staple.subject, "reason": why, "setting": "tls.ocsp_stapling"])
                stapled.labels(staple.subject).set(0)
                continue
            }
            loop.execute { [self] in refresh(staple, http: http, round: current, failures: 0, on: loop) }
        }
    }

    private func refresh(_ staple: OCSPStaple, http: CurlClient, round expected: Int, failures: Int, on loop: EventLoop) {
        guard round.withLock({ $0 }) == expected, let url = staple.responderURL, let body = staple.request() else { return }
        let request = OutboundRequest(method: "POST", url: url, headers: [("Content-Type", "application/ocsp-request"),
                                                                          ("Accept", "application/ocsp-response")],
                                      body: body, timeout: Self.timeout, idempotent: true, call: .other)
        http.fetch(request, on: loop) { [self] result in
            let now = Int64(time(nil))
            var next = Self.retryInterval
            var failed = failures
            switch result {
            case .success(let r) where r.status == 200:
                switch staple.accept(r.body, now: now) {
                case .stapled(let thisUpdate, let nextUpdate):
                    fetches.labels("success").increment()
                    failed = 0
                    if let nextUpdate {
                        let half = (nextUpdate - (thisUpdate ?? now)) / 2
                        next = min(max((thisUpdate ?? now) + half - now, Self.minimumInterval), Self.maximumInterval)
                    } else {
                        next = 3600
                    }
                    if failures > 0 { log.info("OCSP response stapled again", ["certificate": staple.subject]) }
                case .revoked:
                    fetches.labels("revoked").increment()
                    log.error("the responder says this certificate is REVOKED; it is served without a staple: replace it",
                              ["certificate": staple.subject, "responder": url, "setting": "tls.cert"])
                    failed += 1
                case .refused(let why):
                    failed += 1
                    failure(staple, "response refused: \(why)", url: url, failures: failed)
                }
            case .success(let r):
                failed += 1
                failure(staple, "responder answered HTTP \(r.status)", url: url, failures: failed)
            case .failure(let e):
                failed += 1
                failure(staple, "\(e.kind.rawValue): \(e.detail)", url: url, failures: failed)
            }
            staple.expire(now: now)
            stapled.labels(staple.subject).set(staple.isStapled ? 1 : 0)
            // Handshakes stop stapling at nextUpdate by themselves; this timer only makes the
            // gauge and the log say so when that comes before the next fetch.
            if let expiry = staple.expiry, expiry - now < next {
                loop.scheduleTimer(after: UInt64(max(expiry - now, 0)) * 1_000_000_000 + Self.expiryMargin) { [self] in
                    expired(staple, url: url, round: expected)
                }
            }
            loop.scheduleTimer(after: UInt64(next) * 1_000_000_000) { [self] in
                refresh(staple, http: http, round: expected, failures: failed, on: loop)
            }
        }
    }

    /// `now` above is a whole second behind the clock at most; the timer fires this much later
    /// than `nextUpdate` so that the response has expired by then.
    private static let expiryMargin: UInt64 = 1_000_000_000

    /// A stapled response reached its `nextUpdate` before the next fetch.
    private func expired(_ staple: OCSPStaple, url: String, round expected: Int) {
        guard round.withLock({ $0 }) == expected else { return }
        let now = Int64(time(nil))
        staple.expire(now: now)
        guard !staple.isStapled else { return }
        stapled.labels(staple.subject).set(0)
        // Short-lived responses expire before every fetch (at most every 5 minutes): once an
        // hour per certificate says it; the gauge says the rest.
        let logged = lastExpiryLogged.withLock { last -> Bool in
            if let at = last[staple.subject], now - at < 3600 { return false }
            last[staple.subject] = now
            return true
        }
        guard logged else { return }
        log.warn("OCSP response expired (its nextUpdate has passed); handshakes go on without a staple until the responder gives a new one", [
            "certificate": staple.subject, "responder": url, "setting": "tls.ocsp_stapling"])
    }

    /// Counted every time; logged the first time and then every tenth in a row.
    private func failure(_ staple: OCSPStaple, _ reason: String, url: String, failures: Int) {
        fetches.labels("failure").increment()
        guard failures == 1 || failures % 10 == 0 else { return }
        log.warn("OCSP response not refreshed; handshakes go on with the last good one until it expires, then without", [
            "certificate": staple.subject, "responder": url, "reason": reason, "failures_in_a_row": "\(failures)",
            "setting": "tls.ocsp_stapling"])
    }
}
