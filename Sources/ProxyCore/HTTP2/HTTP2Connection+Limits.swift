import CNghttp2

/// **The concurrent-stream limit without connection errors.** RFC 9113 §5.1.2: a HEADERS frame
/// past the advertised `SETTINGS_MAX_CONCURRENT_STREAMS` is a stream error (`PROTOCOL_ERROR` or
/// `REFUSED_STREAM`). Clients race the limit whenever SETTINGS are in flight, and nginx refuses
/// the excess streams one by one. nghttp2 1.52 instead ends the *connection* once the client
/// has acknowledged the setting, taking every stream on it down. So nghttp2 is told a limit of
/// twice the advertised one, the SETTINGS frame on the wire carries the advertised one (its
/// value is rewritten in the one frame that carries it, the server preface), and streams past
/// the advertised limit are refused here with `RST_STREAM REFUSED_STREAM` before any work is
/// done for them (RFC 9113 §8.7: nothing processed, safe to retry). A client that opens more
/// than twice the limit at once still meets nghttp2's connection error, as nginx ends a
/// connection whose client opens more than twice its limit in one read.
extension HTTP2Connection {
    /// What nghttp2 enforces.
    var nghttp2StreamLimit: UInt32 {
        let advertised = settings.maxConcurrentStreams
        return advertised > UInt32.max / 2 ? UInt32.max : advertised * 2
    }

    /// Whether a stream the client opens now is past the advertised limit. Streams nghttp2 has
    /// closed but that have not been run down yet (`closedStreams`) no longer count.
    var streamLimitReached: Bool {
        streams.count - closedStreams.count >= Int(settings.maxConcurrentStreams)
    }

    /// Refuses a stream past the limit: nothing of it reaches an exchange.
    func refuseOverLimit(_ id: Int32) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_REFUSED_STREAM.rawValue)
        listener.engineMetrics.http2.refusedOverLimit.increment()
        listener.throttle.log(.info, "HTTP/2 stream refused: client past max_concurrent_streams", key: "h2 stream limit", fields: [
            ("listener", listener.spec.name), ("peer", peer.text), ("limit", "\(settings.maxConcurrentStreams)"),
            ("setting", "http2.max_concurrent_streams"),
        ], on: loop)
        scheduleSend()
    }

    /// Rewrites `SETTINGS_MAX_CONCURRENT_STREAMS` in the serialized server preface at `frame`
    /// (`count` bytes: a SETTINGS frame as nghttp2 wrote it) to the advertised value. False if
    /// the bytes are not a SETTINGS frame that carries the setting.
    static func advertise(streamLimit: UInt32, inSettingsFrame frame: UnsafeMutableRawPointer, count: Int) -> Bool {
        let p = frame.assumingMemoryBound(to: UInt8.self)
        guard count >= 9, p[3] == UInt8(NGHTTP2_SETTINGS.rawValue), p[4] & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 else { return false }
        let length = Int(p[0]) << 16 | Int(p[1]) << 8 | Int(p[2])
        guard 9 + length <= count, length % 6 == 0 else { return false }
        var entry = 9
        while entry < 9 + length {
            if Int(p[entry]) << 8 | Int(p[entry + 1]) == Int(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue) {
                p[entry + 2] = UInt8(truncatingIfNeeded: streamLimit >> 24)
                p[entry + 3] = UInt8(truncatingIfNeeded: streamLimit >> 16)
                p[entry + 4] = UInt8(truncatingIfNeeded: streamLimit >> 8)
                p[entry + 5] = UInt8(truncatingIfNeeded: streamLimit)
                return true
            }
            entry += 6
        }
        return false
    }

    /// The frame guard found a rule broken (`HTTP2FrameGuard`): the connection ends with a
    /// GOAWAY carrying `code` once what came before the offending frame has been processed.
    func frameRuleBroken(code: UInt32, reason: HTTP2FrameGuard.Reason) {
        nghttp2_session_terminate_session(session, code)
        listener.engineMetrics.http2.frameRuleBroken(reason)
        listener.engineMetrics.http2.connectionErrors.increment()
        var fields = [("listener", listener.spec.name), ("peer", peer.text), ("reason", reason.rawValue)]
        if reason == .flood {
            fields.append(("setting", "http2.glitch_burst, http2.max_glitches_per_second"))
        }
        listener.throttle.log(reason == .flood ? .warn : .info, "HTTP/2 connection ended: client broke a frame rule",
                              key: "h2 frame rule " + reason.rawValue, fields: fields, on: loop)
    }
}
