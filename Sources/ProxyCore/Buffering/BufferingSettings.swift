/// `buffering:` — read bodies ahead of the slow side: an upstream's response ahead of a slow
/// client, so that the app's worker is free as soon as it has written it (nginx
/// `proxy_buffering`, Caddy `response_buffers`), and a slow client's request body before the
/// upstream is connected (`proxy_request_buffering`).
///
/// Without it the proxy reads at most `Exchange.highWater` (256 KiB) ahead of the client: a
/// larger response to a slow phone holds an app worker until the phone has nearly all of it —
/// for servers with one request per worker (Unicorn, Gunicorn's sync workers, Puma with one
/// thread) that is a worker gone for the length of a download. With `responses: N` a response
/// of up to N bytes is read whole while the client takes its time; beyond N (or past
/// `max_memory` for the process) it streams as before. Never for `text/event-stream`, a
/// response that says `X-Accel-Buffering: no`, or an upgraded connection.
public struct BufferingSettings: Sendable, Equatable {
    /// Largest response body read ahead whole (0: off, the default).
    public var responses = 0
    /// Largest request body read whole before the upstream is connected (0: off, the default):
    /// an upload from a slow phone then reaches the app in one go, instead of holding a worker
    /// for as long as the upload takes (nginx `proxy_request_buffering`).
    public var requests = 0
    /// All responses read ahead at once, for the whole process: the memory buffering may take.
    public var maxMemory = 64 << 20

    public init() {}

    public var isEnabled: Bool { responses > 0 || requests > 0 }
}
