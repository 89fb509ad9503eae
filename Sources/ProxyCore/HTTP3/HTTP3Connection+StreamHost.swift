import CNghttp3
import CNgtcp2

/// What the connection does for its streams (`HTTP3StreamHost`): the library calls, each a
/// no-op once the connection is closed, and the lists `runStreams` works through after the
/// library returns.
extension HTTP3Connection: HTTP3StreamHost {
    func submitInformational(_ head: StreamHeadWriter, on stream: Int64) -> Bool {
        guard let h3 else { return false }
        return head.withHTTP3NameValues { nva, count in nghttp3_conn_submit_info(h3, stream, nva, count) } == 0
    }

    func submitResponse(_ head: StreamHeadWriter, withBody: Bool, on stream: Int64) -> Bool {
        guard let h3 else { return false }
        return head.withHTTP3NameValues { nva, count in
            guard withBody else { return nghttp3_conn_submit_response(h3, stream, nva, count, nil) }
            var reader = nghttp3_data_reader(read_data: HTTP3Callbacks.readBody)
            return nghttp3_conn_submit_response(h3, stream, nva, count, &reader)
        } == 0
    }

    func resumeBody(_ stream: Int64) {
        if let h3 { nghttp3_conn_resume_stream(h3, stream) }
    }

    func credit(_ stream: Int64, bytes: Int) {
        guard !closed else { return }
        ngtcp2_conn_extend_max_stream_offset(conn, stream, UInt64(bytes))
        ngtcp2_conn_extend_max_offset(conn, UInt64(bytes))
        scheduleWrite()
    }

    /// The exchange ended a stream early (an abort): both directions are reset.
    func resetStream(_ id: Int64, code: UInt64) {
        guard !closed, closingUntil == 0 else { return }
        ngtcp2_conn_shutdown_stream(conn, id, code)
        scheduleWrite()
    }

    /// The response is complete and the request body was not read to its end: the client is
    /// told to stop sending it (RFC 9114 §4.1, H3_NO_ERROR).
    func stopReading(_ id: Int64) {
        guard !closed, closingUntil == 0 else { return }
        ngtcp2_conn_shutdown_stream_read(conn, id, UInt64(NGHTTP3_H3_NO_ERROR))
    }

    func scheduleWrite() {
        guard !closed else { return }
        wake()
    }

    func markPending(_ stream: HTTP3Stream) {
        guard !stream.queued else { return }
        stream.queued = true
        pending.append(stream)
    }

    func holdForStreams(_ stream: HTTP3Stream) {
        // Once: a stream may flush again before they open.
        if !heldForStreams.contains(where: { $0 === stream }) { heldForStreams.append(stream) }
    }

    func markDrained(_ stream: HTTP3Stream) { drained.append(stream) }

    func markEndedEarly(_ stream: HTTP3Stream) { endedEarly.append(stream.id) }

    /// nghttp3 is done with a stream: it leaves the table, and its budget unit goes back.
    func streamClosed(_ stream: HTTP3Stream) {
        streams[stream.id] = nil
        streamEnded(stream)
    }
}
