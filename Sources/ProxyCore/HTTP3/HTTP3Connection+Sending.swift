import CNghttp3
import CNgtcp2
#if canImport(Glibc)
import Glibc
#endif

/// Sending: packets built by ngtcp2 from nghttp3's stream data, batched for UDP GSO, and the
/// timer that follows ngtcp2's expiry (and the streams' 100 ms deadline sweep).
extension HTTP3Connection {
    /// Builds and sends what ngtcp2 and nghttp3 have (stream data, ACKs, its own frames), up to
    /// `packetsPerWrite` packets, then arms the timer.
    func write() {
        guard !closed, closingUntil == 0 else { return }
        let now = EventLoop.monotonicNow()
        let buffer = quic.sendBuffer
        var packets = 0
        // Packets are built back to back into the loop's send buffer and go out as one GSO batch
        // (`QUICListener.sendBatch`): same path, same size but for a shorter last one.
        var batch = SendBatch()
        while packets < Self.packetsPerWrite {
            var stream: Int64 = -1
            var fin: Int32 = 0
            var count = 0
            if let h3, ngtcp2_conn_get_max_data_left(conn) > 0 {
                let n = nghttp3_conn_writev_stream(h3, &stream, &fin, vecs, 16)
                if n < 0 {
                    flush(&batch)
                    applicationError = Int32(n)
                    failed(NGTCP2_ERR_CALLBACK_FAILURE)
                    return
                }
                count = Int(n)
            }
            var flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_MORE)
            if fin != 0 { flags |= UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) }
            var written: ngtcp2_ssize = -1
            var info = ngtcp2_pkt_info()
            let at = buffer + batch.bytes
            let n = UnsafeMutableRawPointer(vecs).withMemoryRebound(to: ngtcp2_vec.self, capacity: 16) { nv in
                CNgtcp2_conn_writev_stream(conn, &outPath.pointee.path, &info, at, Self.maxPacket, &written, flags, stream,
                                           count == 0 ? nil : nv, count, now)
            }
            if n < 0 {
                switch Int32(n) {
                case NGTCP2_ERR_STREAM_DATA_BLOCKED:
                    nghttp3_conn_block_stream(h3, stream)
                    continue
                case NGTCP2_ERR_STREAM_SHUT_WR:
                    nghttp3_conn_shutdown_stream_write(h3, stream)
                    continue
                case NGTCP2_ERR_WRITE_MORE:
                    nghttp3_conn_add_write_offset(h3, stream, Int(written))
                    continue
                default:
                    flush(&batch)
                    failed(Int32(n))
                    return
                }
            }
            if written >= 0, let h3 { nghttp3_conn_add_write_offset(h3, stream, Int(written)) }
            if n == 0 { break }
            packets += 1
            let ecn = UInt8(truncatingIfNeeded: info.ecn)
            if batch.bytes == 0 {
                ngtcp2_path_copy(&batchPath.pointee.path, &outPath.pointee.path)
                batch.segment = n
                batch.ecn = ecn
            } else if n > batch.segment || ecn != batch.ecn || ngtcp2_path_eq(&batchPath.pointee.path, &outPath.pointee.path) == 0 {
                // It cannot join the batch: the batch goes, and this packet starts the next one.
                flush(&batch)
                memmove(buffer, at, n)
                ngtcp2_path_copy(&batchPath.pointee.path, &outPath.pointee.path)
                batch.segment = n
                batch.ecn = ecn
            }
            batch.bytes += n
            batch.packets += 1
            // A short packet ends a batch (only the last may be shorter); so does a full buffer.
            if n < batch.segment || batch.bytes + Self.maxPacket > QUICListener.sendBufferSize || batch.packets == 64 {
                flush(&batch)
            }
        }
        flush(&batch)
        ngtcp2_conn_update_pkt_tx_time(conn, now)
        if packets == Self.packetsPerWrite { wake() }
        // What the reads of response bytes set off: upstreams read again, streams ended.
        if !drained.isEmpty || !closedStreams.isEmpty || !pending.isEmpty || !resumable.isEmpty || !endedEarly.isEmpty {
            runStreams()
            if !closed { wake() }
        }
        armTimer()
    }

    /// Packets built into the send buffer and not yet sent.
    struct SendBatch {
        var bytes = 0
        var packets = 0
        /// The first packet's size: every other one but the last has it (GSO's segment size).
        var segment = 0
        /// The ECN bits ngtcp2 gave its packets (one value per sendmsg).
        var ecn: UInt8 = 0
    }

    func flush(_ batch: inout SendBatch) {
        guard batch.bytes > 0 else { return }
        quic.sendBatch(quic.sendBuffer, count: batch.bytes, segment: batch.segment, packets: batch.packets,
                       to: batchPath.pointee.path.remote.addr, length: socklen_t(batchPath.pointee.path.remote.addrlen),
                       from: batchPath.pointee.path.local.addr, ecn: batch.ecn)
        listener.engineMetrics.http3.packetsSent.increment(by: batch.packets)
        listener.engineMetrics.http3.bytesSent.increment(by: batch.bytes)
        batch = SendBatch()
    }

    func armTimer() {
        guard !closed else { return }
        var at = ngtcp2_conn_get_expiry(conn)
        // Streams keep their own deadlines (body, send): swept every 100 ms, as HTTP/2's are.
        if !streams.isEmpty { at = min(at, loop.now + 100_000_000) }
        if goingAway && finalGoAwayAt != 0 { at = min(at, finalGoAwayAt) }
        if goingAway && closeNotBefore != 0 && streams.isEmpty { at = min(at, closeNotBefore) }
        if at == UInt64.max { disarm() } else { arm(at: max(at, 1)) }
    }
}
