import CProxyLinux
#if canImport(Glibc)
import Glibc
#endif

/// Static files (`StaticSettings`): the exchange's side. Where a request would go upstream,
/// `serveStaticFile` looks for the file its path names (`StaticPath`, `StaticFile.open`) and,
/// if there is one, answers from it (`answerFromFile`, which the app's X-Accel-Redirect answers
/// go through too): a precompressed sibling if the client takes one, 304, 206 or 416 as
/// `StaticConditions` says, the head through `writeLocalHead` like every answer of the proxy's
/// own. The machine sees a request that went "upstream" and got a response with no request
/// body left (`proxy`, `responseHead`): the send timer and back-pressure are the proxied body's.
///
/// The body goes out two ways:
/// - to a plain HTTP/1.1 socket with `sendfile(2)`, the head ahead of it — with MSG_MORE for a
///   body of at most `staticCorkLimit`, so that a small file leaves in one segment with its head;
/// - through TLS or as HTTP/2 DATA, read into `output` 64 KiB at a time (`pread`), never more
///   than that waiting: the downstream sends it as a proxied body and `outputSent` asks for more.
///
/// The file's descriptor is opened once per request and closed when the body is out
/// (`finishRequest`) or the exchange ends (`end`), whichever comes first (`endStaticBody`).
extension ClientExchange {
    /// How much of a file is read into `output` at a time (TLS, HTTP/2).
    static let staticReadSize = 64 * 1024
    /// Bodies up to this size follow their head in the same segment (the head is written with
    /// MSG_MORE); a larger one's head goes alone. Measured against nginx (bench/static, and the
    /// same probe per size): corked, 1 KiB and 64 KiB cost less CPU a response; 256 KiB and
    /// 1 MiB cost a fifth to a third more (the kernel builds the body's segments after a
    /// partial one), for more requests/s.
    static let staticCorkLimit: UInt64 = 64 * 1024

    /// Answers the request from a file under the static root, if its path names one; false:
    /// it goes upstream as before.
    func serveStaticFile() -> Bool {
        let method = head.method
        guard method == .get || method == .head, machine.requestBodyDone, !head.upgrade,
              let root = listener.state(loop).staticRoot?.descriptor(now: loop.now),
              let relative = RequestView(self).withPath({ StaticPath.relative($0) })
        else { return false }
        let settings = config.staticFiles
        let beneath = !settings.symlinksOutsideRoot
        // The sibling first, as nginx's gzip_static: one open for the common case of an asset
        // with its .br or .gz (it is served even if the file itself is gone).
        var sibling: StaticFile? = nil
        var coding: ContentCoding? = nil
        if settings.precompressed {
            for c in withRequestField("accept-encoding", { StaticConditions.codings(accepting: $0) }) {
                sibling = StaticFile.open(relative, suffix: c == .brotli ? ".br" : ".gz", under: root, beneath: beneath)
                if sibling != nil {
                    coding = c
                    break
                }
            }
        }
        guard let file = sibling ?? StaticFile.open(relative, under: root, beneath: beneath) else { return false }
        var fields: [(name: String, value: String)] = []
        if settings.precompressed { fields.append(("Vary", "Accept-Encoding")) }
        if RequestView(self).withPath({ path in settings.immutablePaths.contains { $0.matches(path) } }) {
            fields.append(("Cache-Control", "public, max-age=31536000, immutable"))
        }
        arm(machine.proxy())
        answerFromFile(file, contentType: String(describing: StaticMediaType.of(relative)), coding: coding,
                       fields: fields, bodyLeft: 0)
        return true
    }

    /// Answers from `file`, which the machine sees as the proxied response (it is in
    /// `proxying`): 200, 206, 304 or 416 as the client's conditional and `Range` fields say
    /// (`StaticConditions`: a HEAD is never a range), the file's validators, `contentType` and
    /// `coding` and `representationFields` with its bytes (200, 206), `fields` with every answer.
    /// `bodyLeft`: request body bytes not yet read (an answer before the body was all in).
    func answerFromFile(_ file: StaticFile, contentType: String, coding: ContentCoding?,
                        representationFields: [(name: String, value: String)] = [],
                        fields: [(name: String, value: String)], bodyLeft: UInt64?) {
        let isHead = head.method == .head
        let etag = StaticConditions.etag(mtime: file.mtime, size: file.size)
        let lastModified = HTTPDateCache.format(epochSeconds: file.mtime)
        var conditions = StaticConditions.Fields()
        conditions.ifNoneMatch = withRequestField("if-none-match") { $0.map { Array($0) } }
        conditions.ifModifiedSince = withRequestField("if-modified-since") { $0.map { Array($0) } }
        conditions.range = withRequestField("range") { $0.map { Array($0) } }
        conditions.ifRange = withRequestField("if-range") { $0.map { Array($0) } }
        let answer = StaticConditions.answer(size: file.size, etag: etag, lastModified: lastModified,
                                             isGet: !isHead, conditions)

        var headers: [(name: String, value: String)] = []
        var status = 200
        var length: UInt64? = file.size
        switch answer {
        case .whole:
            file.end = file.size
        case .part(let first, let last):
            status = 206
            file.offset = first
            file.end = last + 1
            length = last + 1 - first
            headers.append(("Content-Range", "bytes \(first)-\(last)/\(file.size)"))
        case .notModified:
            status = 304
            length = nil
        case .unsatisfiable:
            status = 416
            length = 0
            headers.append(("Content-Range", "bytes */\(file.size)"))
        }
        // The representation's own fields go with its bytes: not on a 304 (RFC 9110 §15.4.5
        // lists what a cache updates from it) nor on a 416.
        if status == 200 || status == 206 {
            headers.append(("Content-Type", contentType))
            if let coding { headers.append(("Content-Encoding", coding.token)) }
            headers.append(("Accept-Ranges", "bytes"))
            headers += representationFields
        }
        headers.append(("ETag", String(decoding: etag, as: UTF8.self)))
        headers.append(("Last-Modified", String(decoding: lastModified, as: UTF8.self)))
        headers += fields
        headers.append(("X-Content-Type-Options", "nosniff"))

        let connection = machine.responseHead(switching: false, bodyEndsWithClose: false, bodyLeft: bodyLeft,
                                              draining: listener.isDraining(loop))
        writeLocalHead(Response(status: status, headers: headers), contentLength: length, connection: connection)
        statusSent = status
        if isHead || (status != 200 && status != 206) || file.remaining == 0 {
            file.close()
            finishRequest()
            return
        }
        staticFile = file
        sendStaticBody()
    }

    /// Sends what the client takes now of the file's body (and the head before it); called
    /// again by `outputSent` once the client has taken what waits. Ends the request once the
    /// last byte is out (plain) or in `output` (TLS, HTTP/2). Out of line: `outputSent` is
    /// inlined into every flush, and this leads back to a flush.
    @inline(never)
    func sendStaticBody() {
        guard let file = staticFile, !machine.isClosed else { return }
        if case .connection(let c) = downstream, c.with({ $0.transport.isPlain }) {
            sendFile(file, to: c.with { $0.fd })
        } else {
            readFileIntoOutput(file)
        }
    }

    /// The descriptor goes (a body not all sent, too: the exchange ended first).
    @inline(never)
    func endStaticBody() {
        staticFile?.close()
        staticFile = nil
    }

    /// Plain HTTP/1.1: the head (if still waiting), then `sendfile(2)` until the
    /// socket is full — the send timer runs and writability brings us back (`outputSent`) — or
    /// the body is out.
    private func sendFile(_ file: StaticFile, to socket: Int32) {
        if !output.isEmpty {
            let r: IOResult
            do {
                r = try Socket.write(socket, from: output.base! + output.reader, count: output.readable,
                                     more: file.remaining <= ClientExchange.staticCorkLimit)
            } catch {
                abort(.clientWriteFailed)
                return
            }
            if case .done(let n) = r {
                output.moveReader(n)
                bytesOut += UInt64(n)
            }
            guard output.isEmpty else {
                // The client is slow already: `flush` waits for writability and calls back.
                flush()
                return
            }
            output.clear()
        }
        while file.remaining > 0 {
            var offset = Int64(file.offset)
            let n = CProxyLinux_sendfile(socket, file.fd, &offset, Int(min(file.remaining, 1 << 30)))
            if n > 0 {
                file.offset += UInt64(n)
                bytesOut += UInt64(n)
                continue
            }
            let e = n == 0 ? 0 : lastErrno()
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK {
                outputWaiting(readMore: wantsInput)
                return
            }
            // 0: the file is shorter than its head said (it was cut while being sent).
            if e == 0 {
                staticFailed(.staticReadFailed("the file shrank while it was sent"))
            } else {
                abort(.clientWriteFailed)
            }
            return
        }
        staticBodyDone()
    }

    /// TLS or HTTP/2: the next piece of the file into `output`, which the downstream sends as
    /// it sends a proxied body. A few pieces per event at most for a client that takes them
    /// as fast as they come (TLS into a large socket buffer), so one download does not hold
    /// the loop; writability brings us back.
    private func readFileIntoOutput(_ file: StaticFile) {
        var rounds = 0
        while true {
            // (The first piece joins the head in `output`: they go out together.)
            let count = Int(min(file.remaining, UInt64(ClientExchange.staticReadSize)))
            if output.base == nil { output = loop.buffers.take() }
            output.reserveWritable(count)
            let n = pread(file.fd, output.writePointer, count, off_t(file.offset))
            if n <= 0 {
                if n < 0 && lastErrno() == EINTR { continue }
                staticFailed(.staticReadFailed(n == 0 ? "the file shrank while it was sent"
                                                      : SystemError(call: "pread", errno: lastErrno()).reason))
                return
            }
            output.writer += n
            file.offset += UInt64(n)
            if file.remaining == 0 {
                staticBodyDone()
                return
            }
            // The nested `outputSent` of a flush that sends everything must not read on: this
            // loop does (`staticFile` is put aside while it flushes).
            staticFile = nil
            flush()
            guard !machine.isClosed else {
                file.close()
                return
            }
            staticFile = file
            // Waiting for the client: `outputSent` brings us back.
            if !output.isEmpty { return }
            rounds += 1
            if rounds == 4 {
                want(read: wantsInput, write: true)
                return
            }
        }
    }

    private func staticBodyDone() {
        endStaticBody()
        finishRequest()
    }

    /// The body cannot be completed: the connection is cut (the head promised a length), and
    /// the line says why.
    private func staticFailed(_ error: EngineError) {
        logProblem(.error, "static file read failed", key: "static", [("reason", error.reason)])
        abort(error)
    }
}
