import CNghttp2
#if canImport(Glibc)
import Glibc
#endif

/// nghttp2's callbacks, set once for every session (nghttp2 copies them into each). Each one
/// only records what happened on its `HTTP2Connection` (the session's user data); the streams
/// run after nghttp2 returns (see `HTTP2Connection`, "Re-entrancy").
final class HTTP2Callbacks: @unchecked Sendable {
    // Written once, read-only afterwards; nghttp2 copies it into each session.
    let pointer: OpaquePointer

    static let shared = HTTP2Callbacks()

    private init() {
        var callbacks: OpaquePointer? = nil
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0, "nghttp2: out of memory")
        pointer = callbacks!
        nghttp2_session_callbacks_set_on_begin_headers_callback(pointer) { _, frame, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                  frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
            connection(user).streamOpened(frame.pointee.hd.stream_id)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(pointer) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }  // trailers: dropped
            let c = connection(user)
            guard let stream = c.streams[frame.pointee.hd.stream_id] else { return 0 }
            stream.request.field(name: UnsafeBufferPointer(start: name, count: nameLength),
                             value: UnsafeBufferPointer(start: value, count: valueLength),
                             limit: HTTP2Stream.headerListLimit(c.listener.config.limits))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(pointer) { _, frame, user in
            guard let frame else { return 0 }
            let type = frame.pointee.hd.type
            guard type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue) else { return 0 }
            let c = connection(user)
            guard let stream = c.streams[frame.pointee.hd.stream_id] else { return 0 }
            let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            if type == UInt8(NGHTTP2_HEADERS.rawValue) && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                stream.prepareInput()
                stream.request.deliverHead(into: &stream.exchange.input, endStream: endStream)
            } else if endStream {
                stream.prepareInput()
                stream.request.deliverEnd(into: &stream.exchange.input)
            } else {
                return 0
            }
            c.markPending(stream)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(pointer) { session, _, id, data, length, user in
            let c = connection(user)
            guard let stream = c.streams[id], !stream.exchange.isClosed else {
                // A stream the exchange is done with: its bytes go back to the windows at once.
                nghttp2_session_consume(session, id, length)
                return 0
            }
            stream.prepareInput()
            stream.request.deliverData(UnsafeRawBufferPointer(start: data, count: length), into: &stream.exchange.input)
            stream.unconsumed += length
            stream.exchange.bytesIn += UInt64(length)
            c.markPending(stream)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(pointer) { _, id, errorCode, user in
            let c = connection(user)
            guard let stream = c.streams[id] else { return 0 }
            c.closedStreams.append((stream, errorCode))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(pointer) { _, frame, user in
            guard let frame else { return 0 }
            let c = connection(user)
            let type = frame.pointee.hd.type
            if type == UInt8(NGHTTP2_GOAWAY.rawValue) {
                c.listener.engineMetrics.http2.goaway(code: frame.pointee.goaway.error_code)
            } else if type == UInt8(NGHTTP2_RST_STREAM.rawValue) {
                c.frameGuard.sentReset(frame.pointee.hd.stream_id)
                if frame.pointee.rst_stream.error_code != NGHTTP2_NO_ERROR.rawValue { c.listener.engineMetrics.http2.resetsSent.increment() }
            }
            return 0
        }
    }

    /// The response body source: the exchange's output, as far as the peer's windows allow.
    static let readBody: nghttp2_data_source_read_callback = { _, id, buffer, length, flags, _, user in
        let c = connection(user)
        guard let stream = c.streams[id], !stream.exchange.isClosed, let buffer, let flags else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        let x = stream.exchange
        let n = min(length, x.output.readable)
        if n > 0 {
            c.frameGuard.sentDataFrame()
            memcpy(buffer, x.output.base! + x.output.reader, n)
            x.output.moveReader(n)
            x.bytesOut += UInt64(n)
        }
        if x.output.isEmpty {
            x.output.clear()
            if stream.responseDone {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                if !x.requestBodyDone { c.endedEarly.append(id) }
                return n
            }
            c.drained.append(stream)
            if n == 0 { return Int(NGHTTP2_ERR_DEFERRED.rawValue) }
        }
        return n
    }
}

/// The session's user data: its connection (unretained; the connection owns the session).
@inline(__always)
private func connection(_ user: UnsafeMutableRawPointer?) -> HTTP2Connection {
    Unmanaged<HTTP2Connection>.fromOpaque(user!).takeUnretainedValue()
}
