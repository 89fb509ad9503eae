#if canImport(Glibc)
import Glibc
#endif

/// Responses the proxy writes itself: phase answers and errors.
extension ClientExchange {
    /// A line about this request, with its `request_id`, through the listener's per-cause
    /// rate limit (`LogThrottle`).
    func logProblem(_ level: Logger.Level, _ message: String, key: String, _ fields: [(String, String)],
                    requestID: String? = nil) {
        guard level >= listener.log.level else { return }
        listener.throttle.log(level, message, key: key, fields: fields + [("request_id", requestID ?? requestIDString)], on: loop)
    }

    /// An error the proxy produced, as HTML, JSON or text as the client asks (`ErrorPage`);
    /// always `Connection: close` — after a refused or failed request we cannot trust where the
    /// next request would start. The error goes to the request's access-log line.
    func respondError(_ error: EngineError) {
        let status = error.status, reason = error.reason
        if current!.error == nil { current!.error = error }
        // The same id as the access-log line (and, for a 502/504, the upstream's log).
        let id = requestIDString
        // One line per cause (status and reason: the reason names the upstream address and
        // the error), then a summary a second: an outage writes a few lines, not one per request.
        logProblem(status >= 500 ? .warn : .info, status >= 500 ? "request failed" : "request refused",
                   key: "\(status) \(reason)", [("status", "\(status)"), ("reason", reason)], requestID: id)
        // A 4xx tells the client what was wrong with its request. A 5xx reason is about the
        // inside (upstream addresses, names, errno texts): it goes to the log only, and the
        // client gets the request id that finds the line.
        let form = headLength > 0 ? withRequestField("accept") { ErrorPage.form(accept: $0) } : .text
        let method = headLength > 0 ? head.method : .get
        let (type, body) = ErrorPage.body(status: status, reason: reason, requestID: id, form: form, method: method,
                                          settings: config.errorPages)
        // Errors describe this one request: never cached (a 414 or 404 is cacheable by default).
        var headers: [(name: String, value: String)] = [("Content-Type", type), ("Cache-Control", "no-store")]
        if let wait = error.retryAfterSeconds {
            headers.append(("Retry-After", String(wait)))
        } else if ErrorPage.retries(status) {
            headers.append(("Retry-After", String(ErrorPage.retrySeconds)))
        }
        if form == .html {
            headers.append(("X-Content-Type-Options", "nosniff"))
            // Our own page loads nothing; an operator's may (its images, its stylesheet).
            if config.errorPages.template(for: status) == nil {
                headers.append(("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"))
            }
        }
        respondLocal(Response(status: status, headers: headers, body: Array(body.utf8)), refusal: true)
    }

    func respondLocal(_ r: Response, refusal: Bool = false) {
        let connectionField: Exchange.ConnectionField
        switch machine.respondLocally(refusal: refusal, draining: listener.isDraining(loop)) {
        case .send(let field):
            connectionField = field
        case .abort(let error):
            // Part of a response is already out: the only honest signal left is to cut the connection.
            abort(error)
            return
        }
        writeLocalHead(r, contentLength: UInt64(r.body.count), connection: connectionField)
        if head.method != .head {
            r.body.withUnsafeBytes { output.append($0) }
        }
        statusSent = r.status
        finishRequest()
    }

    /// The head of a response of the proxy's own (`r`'s body is not written here): its fields,
    /// the operator's header rules and the phases' edits, HSTS, `Date`. `contentLength`: nil
    /// for none (a 304).
    func writeLocalHead(_ r: Response, contentLength: UInt64?, connection: Exchange.ConnectionField) {
        var edits = HeaderEdits()
        if _slowPath(listener.rewritesHeaders) { config.headerRules.response.apply(to: &edits, expand: expandRuleValue) }
        if headLength > 0 { phases { $0.responseFilter(RequestView(self), status: r.status, &edits) } }
        downstream.writeHead(LocalHead(response: r, edits: edits, contentLength: contentLength, connection: connection),
                             for: self, http10: head.version == .http10)
    }

    /// A response of the proxy's own, as the client gets it.
    private struct LocalHead: ResponseHeadComposer {
        let response: Response
        let edits: HeaderEdits
        let contentLength: UInt64?
        let connection: Exchange.ConnectionField
        func compose<W: ResponseHeadWriter>(into w: inout W, for x: ClientExchange) {
            x.composeLocalHead(into: &w, response, edits: edits, contentLength: contentLength, connection: connection)
        }
    }

    private func composeLocalHead<W: ResponseHeadWriter>(into w: inout W, _ r: Response, edits: HeaderEdits,
                                                         contentLength: UInt64?, connection: Exchange.ConnectionField) {
        w.begin(status: r.status, reason: UnsafeRawBufferPointer(start: nil, count: 0))
        for (name, value) in r.headers where !edits.remove.contains(where: { $0.lowercased() == name.lowercased() }) {
            w.field(name, value)
        }
        for (name, value) in edits.add { w.field(name, value) }
        if let hsts = listener.hsts { hsts.withUnsafeBytes { w.field("Strict-Transport-Security", $0) } }
        if let altSvc = listener.altSvc { altSvc.withUnsafeBytes { w.field("Alt-Svc", $0) } }
        if !r.headers.contains(where: { $0.name.lowercased() == "date" }) {
            loop.httpDate.current().withUnsafeBytes { w.field("Date", $0) }
        }
        w.end(contentLength: contentLength, chunked: false, connection: connection)
    }

    /// A header rule's value with `{request_id}` and `{client_address}` filled in.
    func expandRuleValue(_ value: String) -> String {
        HeaderRules.expand(value, requestID: { requestIDString },
                           clientAddress: { headLength > 0 ? RequestView(self).clientAddress : peer.text })
    }

    func logAccess() {
        let now = loop.now
        let record = AccessRecord(
            request: RequestView(self), status: statusSent, upstreamStatus: response.status,
            bytesIn: bytesIn, bytesOut: bytesOut + UInt64(output.readable),
            durationNanos: now - requestStart,
            upstreamNanos: upstreamStart == 0 ? 0 : (upstreamEnd == 0 ? now : upstreamEnd) - upstreamStart,
            error: current!.error)
        if headLength > 0 {
            phases { $0.logging(record) }
            // An engine error on the way to the upstream (no server available answers before any
            // connect) is still a proxied request: it counts there, and as the proxy's own error.
            let gateway = current!.error != nil && statusSent >= 502 && statusSent <= 504
            let route = current!.context.route ?? (upstreamStart != 0 || gateway ? .proxied : .local)
            listener.engineMetrics.request(route, status: statusSent)
            if gateway && route == .proxied { listener.engineMetrics.gatewayError(status: statusSent) }
        } else {
            listener.engineMetrics.request(.local, status: statusSent)
        }
        listener.accessLog?.write(record, hasHead: headLength > 0, loop: loop)
        requestID = RequestID()
    }
}

enum HTTPStatus {
    static func reason(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 417: return "Expectation Failed"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Status"
        }
    }
}
