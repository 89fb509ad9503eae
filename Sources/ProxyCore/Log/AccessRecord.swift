/// What happened to one request, for the access log and the `logging` phase.
public struct AccessRecord {
    public let request: RequestView
    /// The status sent to the client (0 if none was sent: the client or upstream went away first).
    public let status: Int
    /// The upstream's status, or 0 when the request was not proxied.
    public let upstreamStatus: Int
    public let bytesIn: UInt64
    public let bytesOut: UInt64
    public let durationNanos: UInt64
    public let upstreamNanos: UInt64
    /// Why the engine refused, failed or cut the request; nil when it did not (a 404 or a 500
    /// from the upstream is the upstream's answer, not an engine error).
    public let error: EngineError?
}
