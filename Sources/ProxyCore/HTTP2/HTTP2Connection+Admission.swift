import CNghttp2

/// HTTP/2's streams in the client-connection budget (`StreamAdmitting` says why they wait): a
/// stream refused after waiting gets `RST_STREAM REFUSED_STREAM` (RFC 9113 §8.7).
extension HTTP2Connection: StreamAdmitting {
    var admitsStreams: Bool { !closed }

    var admissionReport: StreamAdmissionReport {
        StreamAdmissionReport(protocolName: "HTTP/2", key: "h2 budget wait", waited: listener.engineMetrics.http2.waitedForBudget)
    }

    func started(_ h2: HTTP2Stream) {
        if h2.exchange.input.readable > 0 { markPending(h2) }
    }

    func refuse(_ h2: HTTP2Stream) {
        h2.refused = true
        resetStream(h2.id, code: NGHTTP2_REFUSED_STREAM)
        listener.engineMetrics.http2.refusedAtBudget.increment()
    }

    func admissionLooked() {
        runStreams()
        send()
    }
}
