/// `x_accel_redirect` (`AccelRedirectSettings`): the exchange's side.
///
/// - A client's request for a location's own path is answered 404 before anything else would
///   proxy or serve it (`refuseInternalLocation`), as nginx's `internal`.
/// - An upstream's final head with `X-Accel-Redirect` never reaches the client
///   (`followAccelRedirect`): the proxy lets the upstream go and answers from the file the URI
///   names (`AccelTarget`, `StaticFile.open` under the location's root) exactly as a static file
///   is answered (`answerFromFile`: validators and conditions against the client's own request,
///   ranges, HEAD, sendfile or reads into `output`), with the upstream's fields nginx keeps
///   (`AccelKeptField`). A URI under no location is a 502 (the proxy cannot follow it); a path
///   the root may not serve, or a missing file, a 404 (what nginx answers).
///
/// The upstream's body — Rack::Sendfile's is empty, `Content-Length: 0` — is dropped: when it is
/// already all in the connection's buffer the connection goes back to the pool; otherwise (a
/// chunked or longer body) it is closed, rather than held while the file goes out to read a
/// body nobody wants.
extension ClientExchange {
    /// Whether the request was refused for naming an internal location: under *any* reading
    /// of its path, letter case folded (`PathReadings`, `PathPrefix.covers`), as `protect` —
    /// `/_files%2Fa`, `/_FILES/a` and `/_files.json` are refused too; the canonical path has
    /// already resolved `/./`, `../` and `//`.
    func refuseInternalLocation(_ accel: AccelRedirectSettings) -> Bool {
        let locations = accel.locations
        guard RequestView(self).withPathReadings({ r in r.any { p in locations.contains { $0.prefix.covers(p) } } })
        else { return false }
        respondError(.internalLocation)
        return true
    }

    /// Answers from the file the upstream's `X-Accel-Redirect` names, if its head (parsed in
    /// `response.head`, the first `headLength` bytes of `up.input`) carries one; false: it
    /// does not, and the head goes to the client as it is.
    func followAccelRedirect(_ up: UpstreamConnection, _ accel: AccelRedirectSettings, headLength: Int) -> Bool {
        let r = response.head
        let buffer = up.input.readableBytes
        guard let redirect = r.headers.first(where: { ByteMatching.equalsLowercase(buffer, $0.name, "x-accel-redirect") })
        else { return false }
        let value = UnsafeRawBufferPointer(rebasing: buffer[redirect.value.start..<redirect.value.end])
        let target = AccelTarget.resolve(value, accel.locations.map(\.prefix))
        let uri = target == .unmapped ? Self.printable(value) : ""
        var contentType: String? = nil
        var representation: [(name: String, value: String)] = []
        var kept: [(name: String, value: String)] = []
        for f in r.headers {
            guard let kind = AccelKeptField.of(buffer, f.name) else { continue }
            let field = (name: String(decoding: buffer[f.name.start..<f.name.end], as: UTF8.self),
                         value: String(decoding: buffer[f.value.start..<f.value.end], as: UTF8.self))
            switch kind {
            case .contentType: contentType = field.value
            case .representation: representation.append(field)
            case .always: kept.append(field)
            }
        }
        response.status = r.status
        listener.engineMetrics.upstreamResponse.observe(nanos: loop.now - upstreamStart)
        up.input.reader += headLength
        releaseUpstream(reusable: r.keepAlive && Self.dropBody(r.framing, from: up))

        switch target {
        case .unmapped:
            logProblem(.warn, "X-Accel-Redirect not followed: its URI is under no x_accel_redirect location",
                       key: "x_accel_redirect unmapped", [("uri", uri), ("setting", "x_accel_redirect")])
            respondError(.accelRedirectUnmapped)
        case .refused:
            respondError(.accelFileNotFound)
        case .file(let location, let relative):
            guard let root = listener.state(loop).accelRoots[location].descriptor(now: loop.now),
                  let file = StaticFile.open(relative, under: root, beneath: true)
            else {
                respondError(.accelFileNotFound)
                return true
            }
            answerFromFile(file, contentType: contentType ?? String(describing: StaticMediaType.of(relative)), coding: nil,
                           representationFields: representation, fields: kept, bodyLeft: requestBody.remaining)
        }
        return true
    }

    /// Drops the upstream's body if it is all in `up.input` already; false: it is not (the
    /// connection cannot be used again).
    private static func dropBody(_ framing: BodyFraming, from up: UpstreamConnection) -> Bool {
        switch framing {
        case .none:
            return true
        case .contentLength(let n):
            guard n <= UInt64(up.input.readable) else { return false }
            up.input.reader += Int(n)
            return true
        case .chunked, .untilClose:
            return false
        }
    }

    /// The URI for the log line: printable ASCII, at most 200 bytes.
    private static func printable(_ value: UnsafeRawBufferPointer) -> String {
        String(decoding: value.prefix(200).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}
