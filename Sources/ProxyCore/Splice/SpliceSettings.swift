/// `splice:` — large plain-HTTP/1.x bodies move between the two sockets through a pipe
/// (`splice(2)`), never through the proxy's memory: the kernel hands the socket buffers' pages
/// on instead of copying them out and back in (HAProxy's `option splice-response` and
/// `splice-request`). Responses from the upstream to the client, request bodies the other way.
/// On by default.
///
/// Only where nothing in between needs the bytes: both sockets plain (TLS encrypts in user
/// space), HTTP/1.x to the client (an HTTP/2 stream's body moves as DATA frames), a body sized
/// by Content-Length with at least `minSize` bytes still to come; a response not compressed and
/// not read ahead (`buffering.responses`). Everything else is copied as before, and so is any
/// body that finds no pipe free (`maxPipes`, or the connection budget full).
public struct SpliceSettings: Sendable, Equatable {
    public var enabled = true
    /// Bodies with fewer bytes still to come (once the first read's share has gone out) are
    /// copied. Measured here (bench/results/NOTES.md): a 64 KiB response, 48 KiB of it left
    /// after the first read, costs a quarter to a third less CPU spliced; a 24 KiB one with
    /// 8 KiB left costs the same either way. HAProxy puts the break-even near 4 KiB.
    public var minSize: UInt64 = 16 * 1024
    /// Pipes open at once in the process, each two descriptors (and a unit of the connection
    /// budget while open). Bounded because every pipe may pin up to 64 KiB of kernel memory,
    /// and past `/proc/sys/fs/pipe-user-pages-soft` (16,384 pages per user by default) Linux
    /// gives new pipes a single page.
    public var maxPipes = 256

    public init() {}
}
