/// Early data (`EarlyData`): the exchange's side.
extension ClientExchange {
    /// A request read from early data may go on (true), or has been answered 425 (false).
    func admitEarlyData() -> Bool {
        let view = RequestView(self)
        let why: String
        if !EarlyData.mayServe(head.method) {
            why = "not a safe method"
        } else if !phases({ $0.acceptsEarlyData(view) }) {
            why = "not served before the handshake"
        } else {
            return true
        }
        respondError(.tooEarly(why))
        return false
    }
}
