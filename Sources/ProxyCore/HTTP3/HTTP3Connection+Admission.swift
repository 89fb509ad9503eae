/// HTTP/3's streams in the client-connection budget (`StreamAdmitting` says why they wait): a
/// stream refused after waiting is reset with H3_REQUEST_REJECTED (RFC 9114 §8.1) by its own
/// `received`, which ends its exchange.
extension HTTP3Connection: StreamAdmitting {
    var admitsStreams: Bool { !closed && closingUntil == 0 }

    var admissionReport: StreamAdmissionReport {
        StreamAdmissionReport(protocolName: "HTTP/3", key: "h3 budget wait", waited: listener.engineMetrics.http3.waitedForBudget)
    }

    func started(_ stream: HTTP3Stream) {
        if stream.exchange.input.readable > 0 { markPending(stream) }
    }

    func refuse(_ stream: HTTP3Stream) {
        stream.refused = true
        listener.engineMetrics.http3.refusedAtBudget.increment()
        stream.received()
    }

    func admissionLooked() {
        runStreams()
        write()
    }
}
