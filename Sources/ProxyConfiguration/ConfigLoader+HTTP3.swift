import ProxyCore

/// `http3:`.
extension ConfigLoader {
    /// `http3: { enabled, max_streams, stream_window, connection_window, idle_timeout, retry,
    /// retry_above_handshakes, alt_svc_max_age, early_data, glitch_burst, max_glitches_per_second }`: QUIC beside each TLS listener (whether there
    /// is one is checked with the flags, `TLSWiring.check`).
    func readHTTP3(_ m: MappingReader, into h: inout HTTP3Settings) {
        if let b = m.bool("enabled") { h.enabled = b }
        if let b = m.bool("early_data") { h.earlyData = b }
        if let n = m.int("max_streams", in: 1...10_000) { h.maxStreams = n }
        // Transport parameters (RFC 9000 §18.2): below 16 KiB a request body would crawl; the
        // caps bound what one stream and one connection can make the proxy hold.
        if let v = m.parsed("stream_window", "a size from 16k to 16m, like 256k", {
            Units.size($0).flatMap { (16 << 10...16 << 20).contains($0) ? Int($0) : nil }
        }) {
            h.streamWindow = v
        }
        if let v = m.parsed("connection_window", "a size from 16k to 64m, like 1m", {
            Units.size($0).flatMap { (16 << 10...64 << 20).contains($0) ? Int($0) : nil }
        }) {
            h.connectionWindow = v
        }
        if let v = m.parsed("idle_timeout", "a duration from 1s to 10m, like 30s", {
            Units.duration($0).flatMap { (Timeouts.second...600 * Timeouts.second).contains($0) ? $0 : nil }
        }) {
            h.idleTimeout = v
        }
        let always = m.parsed("retry", "auto or always", { ["auto": false, "always": true][$0] })
        let threshold = m.int("retry_above_handshakes", in: 1...1_000_000)
        if always == true {
            h.retry = QUICRetryPolicy(mode: .always)
        } else if let threshold {
            h.retry = QUICRetryPolicy(mode: .aboveHandshakes(threshold))
        }
        if let v = m.parsed("alt_svc_max_age", "a duration from 1s to 365 days (8760h), like 24h", {
            Units.duration($0).flatMap { (Timeouts.second...365 * 86_400 * Timeouts.second).contains($0) ? $0 : nil }
        }) {
            h.altSvcMaxAge = Int(v / Timeouts.second)
        }
        // An honest connection's handshake and close alone cost a few units (ACKs of the
        // server's flight, a client's retransmitted Handshake packets arriving after their keys
        // are gone; aioquic's GET 2–3, Chromium's sign-in 5–6): 100 at least.
        if let n = m.int("glitch_burst", in: 100...1_000_000) { h.glitchBurst = n }
        if let n = m.int("max_glitches_per_second", in: 1...1_000_000) { h.glitchesPerSecond = n }
        m.finish()
    }
}
