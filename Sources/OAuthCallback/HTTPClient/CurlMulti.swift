import CCurl
import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// The single Swift owner of one curl multi handle, driven by one event loop.
///
/// libcurl tells us which sockets to watch (`CURLMOPT_SOCKETFUNCTION`) and when to call it
/// back (`CURLMOPT_TIMERFUNCTION`); we turn those into the loop's fd watches and timers and
/// report readiness with `curl_multi_socket_action`. Nothing here ever blocks, and no thread
/// is started by us. The multi handle keeps the connection cache and the DNS cache, so
/// requests on the same loop reuse connections and lookups.
///
/// Loop-confined: created, used and closed on its loop's thread only (asserted).
final class CurlMulti {
    let loop: EventLoop
    private var handle: UnsafeMutableRawPointer?
    private var watches: [curl_socket_t: FDWatch] = [:]
    private var timer: TimerHandle?
    /// Transfers inside the multi handle, by easy handle; this table is what keeps them alive
    /// while libcurl holds their unretained pointers.
    private var transfers: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private let thread = pthread_self()

    init(loop: EventLoop) throws(OutboundError) {
        guard CurlGlobal.initialized else { throw OutboundError(.internalError, "curl_global_init failed") }
        guard let handle = curl_multi_init() else { throw OutboundError(.internalError, "curl_multi_init failed") }
        self.loop = loop
        self.handle = handle
        // Unretained: the callbacks only run inside our own curl_multi_* calls, while we live.
        let me = Unmanaged.passUnretained(self).toOpaque()
        var rc = CCurl_multi_setopt_pointer(handle, CURLMOPT_SOCKETDATA, me)
        if rc == CURLM_OK { rc = CCurl_multi_setopt_pointer(handle, CURLMOPT_TIMERDATA, me) }
        if rc == CURLM_OK {
            rc = CCurl_multi_setopt_callback_socket(handle) { _, socket, what, me, _ in
                Unmanaged<CurlMulti>.fromOpaque(me!).takeUnretainedValue().socketChanged(socket, what)
            }
        }
        if rc == CURLM_OK {
            rc = CCurl_multi_setopt_callback_timer(handle) { _, milliseconds, me in
                Unmanaged<CurlMulti>.fromOpaque(me!).takeUnretainedValue().timerChanged(milliseconds)
            }
        }
        guard rc == CURLM_OK else {
            curl_multi_cleanup(handle)
            self.handle = nil
            throw OutboundError(.internalError, "curl_multi_setopt failed: \(Self.describe(rc))")
        }
    }

    deinit { close() }

    private func assertOnLoop() {
        assert(pthread_equal(thread, pthread_self()) != 0, "CurlMulti used off its event loop")
    }

    /// Starts `transfer`; its completion runs later, from a loop event.
    func add(_ transfer: CurlTransfer) {
        assertOnLoop()
        guard let handle, let easy = transfer.easy.handle else {
            transfer.complete(.failure(OutboundError(.internalError, "outbound client closed")))
            return
        }
        transfers[easy] = transfer
        let rc = curl_multi_add_handle(handle, easy)
        guard rc == CURLM_OK else {
            transfers[easy] = nil
            transfer.complete(.failure(OutboundError(.internalError, "curl_multi_add_handle failed: \(Self.describe(rc))")))
            return
        }
        // libcurl now asks for a 0 ms timer (timerChanged); the transfer starts when it fires.
    }

    /// Ends every transfer (their completions get `.internalError`) and frees the handle.
    /// Idempotent.
    func close() {
        guard let handle else { return }
        assertOnLoop()
        self.handle = nil
        let pending = transfers
        transfers.removeAll()
        for easy in pending.keys { curl_multi_remove_handle(handle, easy) }
        curl_multi_cleanup(handle)
        for watch in watches.values { watch.cancel() }
        watches.removeAll()
        timer?.cancel()
        timer = nil
        for transfer in pending.values {
            transfer.complete(.failure(OutboundError(.internalError, "outbound client closed")))
        }
    }

    // MARK: libcurl → loop (called from inside curl_multi_* calls: must not call back into curl)

    private func socketChanged(_ socket: curl_socket_t, _ what: Int32) -> Int32 {
        if what == CURL_POLL_REMOVE {
            // Called before libcurl closes the socket, so the fd cannot have been reused yet.
            watches.removeValue(forKey: socket)?.cancel()
            return 0
        }
        let readable = what == CURL_POLL_IN || what == CURL_POLL_INOUT
        let writable = what == CURL_POLL_OUT || what == CURL_POLL_INOUT
        if let watch = watches[socket] {
            watch.update(readable: readable, writable: writable)
            return 0
        }
        guard handle != nil else { return 0 }
        do {
            watches[socket] = try loop.watch(fd: socket, readable: readable, writable: writable) { [unowned self] r, w in
                self.socketReady(socket, readable: r, writable: w)
            }
        } catch {
            return -1  // libcurl fails the transfers using this socket
        }
        return 0
    }

    private func timerChanged(_ milliseconds: Int) -> Int32 {
        timer?.cancel()
        timer = nil
        guard milliseconds >= 0, handle != nil else { return 0 }
        // Even a 0 ms timeout must not be acted on here (we are inside libcurl): the loop runs
        // it after the current batch of events.
        timer = loop.scheduleTimer(after: UInt64(milliseconds) * 1_000_000) { [unowned self] in
            self.timer = nil
            self.drive(CCurl_SOCKET_TIMEOUT, 0)
        }
        return 0
    }

    // MARK: loop → libcurl

    private func socketReady(_ socket: curl_socket_t, readable: Bool, writable: Bool) {
        var flags: Int32 = 0
        if readable { flags |= CURL_CSELECT_IN }
        if writable { flags |= CURL_CSELECT_OUT }
        drive(socket, flags)
    }

    private func drive(_ socket: curl_socket_t, _ flags: Int32) {
        guard let handle else { return }
        var running: Int32 = 0
        _ = curl_multi_socket_action(handle, socket, flags, &running)
        finishCompleted()
    }

    /// Collects the finished transfers first and completes them after, so that a completion
    /// that starts new work never runs while libcurl's message queue is being read.
    private func finishCompleted() {
        guard let handle else { return }
        var finished: [(UnsafeMutableRawPointer, CURLcode)] = []
        var left: Int32 = 0
        while let message = curl_multi_info_read(handle, &left) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                finished.append((easy, message.pointee.data.result))
            }
        }
        for (easy, code) in finished {
            guard let transfer = transfers.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(handle, easy)
            let result = transfer.result(code)
            if case .failure(let error) = result {
                let now = EventLoop.monotonicNow()
                if transfer.mayRetry(error, code: code, now: now) {
                    do {
                        try transfer.prepareRetry(now: now)
                        add(transfer)
                        continue
                    } catch {
                        transfer.complete(.failure(error))
                        continue
                    }
                }
            }
            transfer.complete(result)
        }
    }

    static func describe(_ code: CURLMcode) -> String {
        guard let text = curl_multi_strerror(code) else { return "curl multi error \(code.rawValue)" }
        return String(cString: text)
    }
}
