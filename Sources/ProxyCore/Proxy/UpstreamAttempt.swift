/// Where a request's attempts at the upstream stand, and what a failed one leads to, as a pure
/// machine: the shell (`ClientExchange+Upstream.swift`) connects, counts health, picks servers
/// and reports each failure here; the rules of docs/reference.md ("Moving a request") are
/// written once, below, and `UpstreamAttemptTests` has a row for each.
///
/// A failure before any response began leads to one of four things:
/// - `freshConnection`: a pooled connection the server had already closed took an idempotent
///   request without a body, and nothing came back: once, on a new connection to the same server
///   (every proxy meets a keep-alive race; the app never saw the request);
/// - `nextAddress`: the connection never opened and the server's name has an address not yet
///   tried this time (up to 8);
/// - `nextServer`: another server, if the balancer has one — else `fail` with the same error;
/// - `fail`: answer with the error (502, 503, 504).
/// Whether a request may go again at all is the error's (`EngineError.resend`).
///
/// An answer, too, can send a request to another server: one whose status the group lists in
/// `retry_statuses` (`movesOnAnswer`).
struct UpstreamAttempt: Equatable {
    /// The server tried now (index into the upstream group; -1: none chosen yet).
    private(set) var server = -1
    /// The servers tried for this request, a bit each: not chosen again for it.
    private(set) var triedServers: UInt64 = 0
    /// Connections begun to the current server (its addresses, in turn).
    private(set) var connections = 0
    /// The stale-connection retry was used (once per server: a request moved to another server
    /// may meet that server's stale pooled connection too).
    private(set) var retriedStale = false

    /// What the failed attempt was, as the shell saw it.
    struct Facts: Equatable {
        /// The request may be repeated without effect (RFC 9110 §9.2.2).
        var idempotent: Bool
        /// A connection was attempted (false: the server had no address to connect to).
        var addressTried = true
        /// The current server's addresses worth trying (1 for an IP address; a name's, up to 8).
        var addresses = 1
        /// The connection was taken from the pool (it served a request before).
        var reused = false
        /// A response byte came back.
        var receivedAny = false
        /// Request body bytes read from the client so far.
        var bodyBytes: UInt64 = 0
        /// Those bytes wait unsent behind the head (the connection never opened), so they can be
        /// taken back and sent on the next connection.
        var bodyUnsent = true
    }

    enum Decision: Equatable {
        case freshConnection
        case nextAddress
        case nextServer(elseFail: EngineError)
        case fail(EngineError)
    }

    /// A server was chosen for the next attempt.
    mutating func serverChosen(_ server: Int) {
        self.server = server
        if server >= 0 && server < 64 { triedServers |= 1 << UInt64(server) }
        connections = 0
        retriedStale = false
    }

    /// A connection to the current server is being opened.
    mutating func connecting() {
        connections += 1
    }

    /// The attempt failed with `error` before any response began. Returns what follows, and the
    /// failure to count against the server's health (nil: none — a stale pooled connection is
    /// not the server's fault, and a next address is the resolver's to remember).
    mutating func failed(_ error: EngineError, _ facts: Facts) -> (next: Decision, count: UpstreamGroup.Failure?) {
        switch error.resend {
        case .any:
            // Nothing reached the app. A body read so far goes too, if it can be taken back.
            if facts.bodyBytes > 0 && !facts.bodyUnsent { return (.fail(error), .connect) }
            if facts.addressTried && connections > 0 && connections < min(facts.addresses, 8) { return (.nextAddress, nil) }
            return (.nextServer(elseFail: error), .connect)
        case .ifIdempotent:
            let repeatable = facts.idempotent && facts.bodyBytes == 0 && !facts.receivedAny
            if repeatable && facts.reused && !retriedStale {
                retriedStale = true
                return (.freshConnection, nil)
            }
            return (repeatable ? .nextServer(elseFail: error) : .fail(error), .closed)
        case .never:
            return (.fail(error), error.code == .upstreamResponseTimeout ? .timeout : nil)
        }
    }

    /// Whether an answer with `status` sends the request to another server of its group
    /// (`retry_statuses`, nginx's `proxy_next_upstream http_502 …`): only an idempotent request
    /// whose body was empty (there is nothing to send again; nginx does the same for
    /// non-idempotent methods by default and HAProxy never resends a body), and only before
    /// anything of the answer reached the client. Each server is tried once (`triedServers`);
    /// when none is left, the last answer goes to the client as it is.
    func movesOnAnswer(_ status: Int, retryStatuses: [Int], _ facts: Facts) -> Bool {
        retryStatuses.contains(status) && facts.idempotent && facts.bodyBytes == 0 && server >= 0
    }
}
