/// Requests that arrive in early data (0-RTT: TLS 1.3's, QUIC's) travel before the handshake
/// proves the client is live, and an attacker who recorded them can send them again. The engine
/// serves only safe methods from early data (RFC 8470 §3, RFC 9110 §9.2.1) — replaying a `GET`
/// repeats a read — and asks the phases about the rest (`HTTPPhases.acceptsEarlyData`: the OAuth
/// layer refuses every endpoint of its own, so a replayed callback never reaches the token
/// exchange twice). Anything else gets 425 Too Early.
///
/// Early data is off unless a downstream accepts it: a request is marked by the downstream that
/// read it (`ClientExchange.earlyData`). Only HTTP/3 does, with `http3.early_data` on (a request
/// whose head was complete in 0-RTT packets); TCP's TLS never accepts early data.
enum EarlyData {
    /// The methods served from early data.
    static func mayServe(_ method: HTTPMethod) -> Bool {
        switch method {
        case .get, .head, .options: return true
        case .post, .put, .delete, .patch, .connect, .trace, .other: return false
        }
    }
}
