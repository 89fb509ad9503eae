import CCurl
import ProxyCore
import Synchronization

/// The outbound HTTPS client for identity-provider calls: libcurl's multi interface, driven
/// by the proxy's own event loops. Each loop gets its own multi handle (made on first use),
/// so a request runs entirely on the loop it was issued for, shares that loop's connection
/// and DNS caches, and never blocks it.
///
/// - Certificates are always verified (there is no switch); `caFile`, when set, is the only
///   trust anchor, otherwise the system store is used.
/// - Only `https` and `http` URLs; redirects are returned, not followed.
/// - `http_proxy` / `https_proxy` / `no_proxy` from the environment are honoured (libcurl).
/// - A failed request is tried once more, on a new connection, when nothing was sent
///   (`.connect`), or when it is idempotent and the peer answered nothing. A non-idempotent
///   request (a token POST) always gets its own connection and is never sent twice.
public final class CurlClient: HTTPFetching {
    private let options: CurlOptions
    private let state = Mutex(State())

    private struct State {
        var slots: [Int: CurlLoopSlot] = [:]
        var closed = false
    }

    /// - Parameters:
    ///   - caFile: PEM file of the CAs to trust instead of the system store (tests, private IdPs).
    ///   - maxResponseBytes: larger response bodies fail with `.protocolError`.
    ///   - userAgent: sent unless the request carries its own `User-Agent`.
    /// The CA file it trusts (nil: the system store).
    public var caFile: String? { options.caFile }

    public init(caFile: String? = nil, maxResponseBytes: Int = 1 << 20, userAgent: String = "callback-proxy") {
        options = CurlOptions(caFile: caFile, maxResponseBytes: max(0, maxResponseBytes), userAgent: userAgent)
    }

    deinit { close() }

    /// Safe from any thread. The work always starts in a task on `loop`, so `completion` never
    /// runs before `fetch` has returned, and always runs on `loop`'s thread.
    public func fetch(_ request: OutboundRequest, on loop: EventLoop,
                      _ completion: @escaping (Result<OutboundResponse, OutboundError>) -> Void) {
        let completion = LoopBound(completion)
        loop.execute { [self] in
            start(request, on: loop, completion.value)
        }
    }

    /// Ends all transfers on every loop (their completions get `.internalError`) and frees the
    /// multi handles, each on its own loop. Later `fetch` calls fail the same way. Idempotent;
    /// call it before stopping the loops, or the handles go away with them unfreed.
    public func close() {
        let slots = state.withLock { state -> [CurlLoopSlot] in
            state.closed = true
            defer { state.slots.removeAll() }
            return Array(state.slots.values)
        }
        for slot in slots {
            slot.loop.execute { slot.multi.close() }
        }
    }

    // MARK: On the loop's thread

    private func start(_ request: OutboundRequest, on loop: EventLoop,
                       _ completion: @escaping (Result<OutboundResponse, OutboundError>) -> Void) {
        let multi: CurlMulti
        do {
            multi = try self.multi(for: loop)
        } catch {
            completion(.failure(error))
            return
        }
        let transfer: CurlTransfer
        do {
            transfer = try CurlTransfer(request, options: options, now: EventLoop.monotonicNow(), completion: completion)
        } catch {
            completion(.failure(error))
            return
        }
        multi.add(transfer)
    }

    /// This loop's multi handle, made on first use. Must run on `loop`'s thread: that is where
    /// the multi handle is created and the only place it is ever used.
    private func multi(for loop: EventLoop) throws(OutboundError) -> CurlMulti {
        let (slot, replaced) = try state.withLock { state throws(OutboundError) -> (CurlLoopSlot, CurlLoopSlot?) in
            guard !state.closed else { throw OutboundError(.internalError, "outbound client closed") }
            let existing = state.slots[loop.index]
            if let existing, existing.loop === loop { return (existing, nil) }
            // A different loop object under the same index (loops rebuilt, as in tests): the
            // old multi is closed on its own loop below.
            let slot = CurlLoopSlot(loop: loop, multi: try CurlMulti(loop: loop))
            state.slots[loop.index] = slot
            return (slot, existing)
        }
        if let replaced { replaced.loop.execute { replaced.multi.close() } }
        return slot.multi
    }
}

/// One loop's multi handle in the client's table.
///
/// `@unchecked Sendable`: the table is shared by all loops (behind the client's mutex, which
/// guards only the table), but each `multi` is created on its loop's thread and only ever
/// touched there — by `start` and `close` tasks, both posted to that loop with `execute`,
/// and by libcurl callbacks that loop dispatches. `CurlMulti` asserts this.
private final class CurlLoopSlot: @unchecked Sendable {
    let loop: EventLoop
    let multi: CurlMulti

    init(loop: EventLoop, multi: CurlMulti) {
        self.loop = loop
        self.multi = multi
    }
}

/// Carries a loop-confined value (a completion closure) into a task posted to that loop.
/// `@unchecked Sendable`: the value is only used by the task, on the loop's thread — the
/// `HTTPFetching` contract is that the completion runs there.
private struct LoopBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
