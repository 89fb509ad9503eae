import ProxyCore

/// The OAuth layer as the engine sees it: one conformance of the phases API. Everything but
/// the callback path passes through untouched; the callback is answered by the pipeline,
/// asynchronously, without blocking the loop.
public struct OAuthPhases: HTTPPhases {
    private let pipeline: CallbackPipeline
    private let callbackPath: [UInt8]
    private let log: Logger

    public init(pipeline: CallbackPipeline, log: Logger) {
        self.pipeline = pipeline
        self.callbackPath = Array(pipeline.settings.callbackPath.utf8)
        self.log = log
    }

    public func requestFilter(_ request: borrowing RequestView) -> RequestDecision {
        guard request.pathEquals(callbackPath) else { return .continue }
        let method = request.method
        guard method == .get || method == .head else {
            return .respond(CallbackPage.error(status: 405, message: "This address only accepts GET.",
                                               extraHeaders: [("Allow", "GET, HEAD")]))
        }
        // Copied now: the view is only valid during this call.
        let query = request.query ?? ""
        let loop = request.eventLoop
        let pipeline = self.pipeline
        let log = self.log
        let started = loop.nowNanoseconds
        return .deferred { sink in
            pipeline.handle(query: query, on: loop) { outcome in
                let millis = String(Double((loop.nowNanoseconds - started) / 1000) / 1000)
                switch outcome {
                case .verified(let identity, let parameters):
                    log.info("callback verified", ["provider": parameters.provider, "platform": parameters.platform,
                                                   "duration_ms": millis])
                    sink.respond(CallbackPage.verified(identity))
                case .failed(let failure, let parameters):
                    let level: Logger.Level = failure.source == .client ? .info : .warn
                    log.log(level, "callback failed", ["provider": parameters?.provider ?? "", "platform": parameters?.platform ?? "",
                                                       "source": failure.source.rawValue, "reason": failure.code,
                                                       "detail": failure.logDetail, "duration_ms": millis])
                    sink.respond(CallbackPage.error(status: failure.status, message: failure.userMessage))
                }
            }
        }
    }
}
