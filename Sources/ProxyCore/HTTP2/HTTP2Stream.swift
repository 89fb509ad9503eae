/// What a `ClientConnection` running one HTTP/2 stream holds besides the exchange itself: the
/// request as nghttp2 decodes it (`request`, until it is delivered as an HTTP/1.1 head), and the
/// stream's flow-control and ending state.
final class HTTP2Stream {
    unowned(unsafe) let connection: HTTP2Connection
    let id: Int32
    var request = HTTP2RequestHead()
    /// DATA bytes delivered to the exchange and not yet given back to the peer's window.
    var unconsumed = 0
    /// In the connection's `pending` list.
    var queued = false
    /// Response heads written and not yet submitted (1xx ones, then the final one).
    var heads: [HTTP2HeadWriter] = []
    /// The response HEADERS went to nghttp2.
    var responseSubmitted = false
    /// The exchange finished its response: END_STREAM once its output is sent.
    var responseDone = false
    /// nghttp2 closed the stream.
    var finished = false
    /// How the stream counts in the client-connection budget (`HTTP2Connection.admitWaiting`):
    /// it runs on its connection's own unit, or on one of its own from the budget, or it waits
    /// (since `waitingSince`) for either. Given back when the stream ends.
    var holdsConnectionUnit = false
    var budgetUnit: ConnectionBudget? = nil
    var waitingSince: UInt64 = 0
    /// It waited too long and was refused (`REFUSED_STREAM`): it never ran.
    var refused = false

    init(connection: HTTP2Connection, id: Int32) {
        self.connection = connection
        self.id = id
    }

    /// The largest header list accepted (and advertised in SETTINGS_MAX_HEADER_LIST_SIZE):
    /// the HTTP/1.1 head limit plus RFC 9113's 32 bytes of overhead per field.
    static func headerListLimit(_ limits: HTTPLimits) -> Int {
        limits.maxHeadBytes + 32 * limits.maxHeaderCount
    }
}
