import CNghttp3
import CNgtcp2
import COpenSSL

/// ngtcp2's and nghttp3's callbacks, one table each for every connection (the libraries copy
/// them). Each records what happened on its `HTTP3Connection` (the user data) or its
/// `HTTP3Stream` (nghttp3's stream user data); the streams run after the library returns (see
/// `HTTP3Connection`, "Re-entrancy"). A callback that fails because nghttp3 did leaves its
/// error in `applicationError`, for the CONNECTION_CLOSE.
enum HTTP3Callbacks {
    static let quic: ngtcp2_callbacks = {
        var c = ngtcp2_callbacks()
        c.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb
        c.recv_crypto_data = { conn, level, offset, data, length, user in
            connection(user).work.progress(bytes: 0)
            return ngtcp2_crypto_recv_crypto_data_cb(conn, level, offset, data, length, user)
        }
        c.encrypt = ngtcp2_crypto_encrypt_cb
        c.decrypt = ngtcp2_crypto_decrypt_cb
        c.hp_mask = ngtcp2_crypto_hp_mask_cb
        c.update_key = ngtcp2_crypto_update_key_cb
        c.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb
        c.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb
        c.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb
        c.version_negotiation = ngtcp2_crypto_version_negotiation_cb
        c.rand = { dest, length, _ in _ = RAND_bytes(dest, Int32(length)) }
        c.handshake_completed = { _, user in
            connection(user).handshakeCompleted()
            return 0
        }
        c.get_new_connection_id = { _, cid, token, length, user in
            let me = connection(user)
            me.work.connectionIDIssued(now: me.loop.now)
            let id = me.newConnectionID()
            guard length == id.count, let cid, let token else { return NGTCP2_ERR_CALLBACK_FAILURE }
            id.withUnsafeBufferPointer { ngtcp2_cid_init(cid, $0.baseAddress, $0.count) }
            let reset = me.quic.shared.tokens.statelessResetToken(for: id)
            reset.withUnsafeBufferPointer { token.update(from: $0.baseAddress!, count: $0.count) }
            me.issued(id)
            return 0
        }
        c.remove_connection_id = { _, cid, user in
            guard let cid else { return 0 }
            connection(user).retired(QUICTokens.bytes(cid.pointee))
            return 0
        }
        c.recv_rx_key = { _, level, user in
            // HTTP/3 starts with the first keys that can carry requests: 0-RTT's when early data
            // was accepted (its requests come before the 1-RTT keys), else 1-RTT's.
            guard level == NGTCP2_CRYPTO_LEVEL_APPLICATION || level == NGTCP2_CRYPTO_LEVEL_EARLY else { return 0 }
            return connection(user).setUpHTTP3(withStreams: level == NGTCP2_CRYPTO_LEVEL_APPLICATION)
        }
        c.recv_stream_data = { conn, flags, stream, _, data, length, user, _ in
            let me = connection(user)
            me.work.progress(bytes: length)
            guard let h3 = me.h3 else { return 0 }
            let fin: Int32 = flags & UInt32(NGTCP2_STREAM_DATA_FLAG_FIN) != 0 ? 1 : 0
            me.earlyChunk = flags & UInt32(NGTCP2_STREAM_DATA_FLAG_EARLY) != 0
            let consumed = nghttp3_conn_read_stream(h3, stream, data, length, fin)
            if consumed < 0 {
                me.applicationError = Int32(consumed)
                return NGTCP2_ERR_CALLBACK_FAILURE
            }
            // What nghttp3 consumed itself (frame headers, QPACK); DATA payloads are credited
            // once their exchange has passed them on (`HTTP3Stream.creditIfWanted`).
            ngtcp2_conn_extend_max_stream_offset(conn, stream, UInt64(consumed))
            ngtcp2_conn_extend_max_offset(conn, UInt64(consumed))
            return 0
        }
        c.acked_stream_data_offset = { _, stream, _, length, user, _ in
            let me = connection(user)
            me.work.progress(bytes: Int(length))
            guard let h3 = me.h3 else { return 0 }
            let rv = nghttp3_conn_add_ack_offset(h3, stream, length)
            if rv != 0 {
                me.applicationError = rv
                return NGTCP2_ERR_CALLBACK_FAILURE
            }
            return 0
        }
        c.stream_close = { _, flags, stream, code, user, _ in
            let me = connection(user)
            guard let h3 = me.h3 else { return 0 }
            let error = flags & UInt32(NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) != 0 ? code : UInt64(NGHTTP3_H3_NO_ERROR)
            let rv = nghttp3_conn_close_stream(h3, stream, error)
            guard rv == 0 || rv == NGHTTP3_ERR_STREAM_NOT_FOUND else {
                me.applicationError = rv
                return NGTCP2_ERR_CALLBACK_FAILURE
            }
            return 0
        }
        c.stream_reset = { _, stream, _, _, user, _ in
            let me = connection(user)
            me.work.charge(.streamReset, now: me.loop.now)
            guard let h3 = me.h3 else { return 0 }
            return nghttp3_conn_shutdown_stream_read(h3, stream) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        c.stream_stop_sending = { _, stream, _, user, _ in
            let me = connection(user)
            me.work.charge(.streamReset, now: me.loop.now)
            guard let h3 = me.h3 else { return 0 }
            return nghttp3_conn_shutdown_stream_read(h3, stream) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        c.extend_max_remote_streams_bidi = { _, max, user in
            let me = connection(user)
            if let h3 = me.h3 { nghttp3_conn_set_max_client_streams_bidi(h3, max) }
            return 0
        }
        c.extend_max_stream_data = { _, stream, _, user, _ in
            let me = connection(user)
            guard let h3 = me.h3 else { return 0 }
            return nghttp3_conn_unblock_stream(h3, stream) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE
        }
        return c
    }()

    static let http3: nghttp3_callbacks = {
        var c = nghttp3_callbacks()
        c.begin_headers = { h3, id, user, _ in
            let me = connection(user)
            let stream = me.streamOpened(id)
            nghttp3_conn_set_stream_user_data(h3, id, Unmanaged.passUnretained(stream).toOpaque())
            return 0
        }
        c.recv_header = { _, _, _, name, value, _, user, streamUser in
            guard let streamUser else { return 0 }
            let s = stream(streamUser)
            let n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value)
            s.request.field(name: UnsafeBufferPointer(start: n.base, count: n.len), value: UnsafeBufferPointer(start: v.base, count: v.len),
                            limit: connection(user).headerListLimit)
            return 0
        }
        c.end_headers = { _, _, fin, user, streamUser in
            guard let streamUser else { return 0 }
            stream(streamUser).receivedHead(endStream: fin != 0, early: connection(user).earlyChunk)
            return 0
        }
        c.recv_trailer = { _, _, _, name, value, _, user, streamUser in
            guard let streamUser else { return 0 }
            let n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value)
            stream(streamUser).request.field(name: UnsafeBufferPointer(start: n.base, count: n.len),
                                             value: UnsafeBufferPointer(start: v.base, count: v.len),
                                             limit: connection(user).headerListLimit)
            return 0
        }
        c.recv_data = { _, _, data, length, user, streamUser in
            guard let streamUser else { return 0 }
            let s = stream(streamUser)
            if !s.receivedData(UnsafeRawBufferPointer(start: data, count: length)) {
                // A stream the exchange is done with: its bytes go back to the windows at once.
                connection(user).credit(s.id, bytes: length)
            }
            return 0
        }
        c.deferred_consume = { _, id, consumed, user, _ in
            let me = connection(user)
            ngtcp2_conn_extend_max_stream_offset(me.conn, id, UInt64(consumed))
            ngtcp2_conn_extend_max_offset(me.conn, UInt64(consumed))
            return 0
        }
        c.end_stream = { _, _, _, streamUser in
            guard let streamUser else { return 0 }
            stream(streamUser).receivedEnd()
            return 0
        }
        c.acked_stream_data = { _, _, length, user, streamUser in
            guard let streamUser else { return 0 }
            let s = stream(streamUser)
            if s.acknowledged(Int(length)) { connection(user).resumable.append(s) }
            return 0
        }
        c.stream_close = { _, id, code, user, streamUser in
            let me = connection(user)
            // A client request stream (bidirectional, client-initiated: id % 4 == 0) is gone:
            // the client may open another.
            if id & 0x3 == 0 { ngtcp2_conn_extend_max_streams_bidi(me.conn, 1) }
            if let streamUser { me.closedStreams.append((stream(streamUser), code)) }
            return 0
        }
        c.stop_sending = { _, id, code, user, _ in
            let me = connection(user)
            return ngtcp2_conn_shutdown_stream_read(me.conn, id, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE
        }
        c.reset_stream = { _, id, code, user, _ in
            let me = connection(user)
            return ngtcp2_conn_shutdown_stream_write(me.conn, id, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE
        }
        return c
    }()

    /// The response body source: the exchange's output, as `HTTP3Stream.pullBody` gives it.
    static let readBody: nghttp3_read_data_callback = { _, _, vec, _, flags, _, streamUser in
        guard let streamUser, let vec, let flags else { return nghttp3_ssize(NGHTTP3_ERR_CALLBACK_FAILURE) }
        guard let pulled = stream(streamUser).pullBody() else { return nghttp3_ssize(NGHTTP3_ERR_WOULDBLOCK) }
        var count = 0
        if let chunk = pulled.chunk {
            vec.pointee = nghttp3_vec(base: chunk.baseAddress!.assumingMemoryBound(to: UInt8.self), len: chunk.count)
            count = 1
        }
        if pulled.end { flags.pointee |= UInt32(NGHTTP3_DATA_FLAG_EOF) }
        return nghttp3_ssize(count)
    }
}

@inline(__always)
private func connection(_ user: UnsafeMutableRawPointer?) -> HTTP3Connection {
    Unmanaged<HTTP3Connection>.fromOpaque(user!).takeUnretainedValue()
}

@inline(__always)
private func stream(_ user: UnsafeMutableRawPointer) -> HTTP3Stream {
    Unmanaged<HTTP3Stream>.fromOpaque(user).takeUnretainedValue()
}
