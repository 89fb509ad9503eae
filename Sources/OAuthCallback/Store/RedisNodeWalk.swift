import ProxyCore

/// A question a store asks of nodes it keeps no connection to — the sentinels where the
/// master is (`RedisSentinel`), the cluster's nodes for the slot map (`RedisCluster`) — in the
/// parts that differ; `RedisNodeWalk` does the asking.
///
/// What differs, and why it stays with each: who the candidates are and in which order
/// (sentinels by configured index, the one that answered last first; cluster nodes by
/// address, the seeds' certificate names beside them, each address once), how a reply is read
/// (an address, a slot map checked against the node that sent it), and the sentence when none
/// answered (a cluster with no candidate at all names its set-up problem instead).
protocol RedisNodeQuery {
    /// Who may be asked: a sentinel's index, a cluster node.
    associatedtype Candidate
    associatedtype Answer
    /// The one command each candidate is sent.
    var queryCommand: [[UInt8]] { get }
    /// A connection for one query to `candidate`, under the query's timeout. It logs nothing:
    /// one line per outage comes from the caller, with every candidate's answer in it.
    func queryConnection(to candidate: Candidate, on loop: EventLoop) -> RedisConnection
    /// `candidate` at the head of what it answered, in a failure's text.
    func label(_ candidate: Candidate) -> String
    /// The reply as an answer, or why it is none (then the next candidate is asked).
    func answer(_ reply: RedisReply, from candidate: Candidate) -> Result<Answer, StoreError>
    /// `candidate`'s answer is the one used; called before the walk's `done`.
    func answered(_ candidate: Candidate, _ answer: Answer)
    /// The failure's text when no candidate answered, from what each said (in order).
    func nobodyAnswered(_ failures: [String]) -> String
}

/// One walk over the candidates, on one loop: each is asked in turn over a short-lived
/// connection (closed after its one reply), and the first usable answer wins; a refused
/// connection, a timeout, an error or an answer the query cannot use moves on to the next.
/// `done` runs on `loop`, exactly once, never inside `start()`; its failure is `.unavailable`
/// and says what each candidate answered.
///
/// Loop-confined; kept alive by the closures of its connection until `done` has run.
final class RedisNodeWalk<Query: RedisNodeQuery> {
    private let query: Query
    private let candidates: [Query.Candidate]
    private let loop: EventLoop
    private let done: (Result<Query.Answer, StoreError>) -> Void
    private var position = 0
    private var failures: [String] = []

    init(_ query: Query, candidates: [Query.Candidate], loop: EventLoop,
         done: @escaping (Result<Query.Answer, StoreError>) -> Void) {
        self.query = query
        self.candidates = candidates
        self.loop = loop
        self.done = done
    }

    func start() { next() }

    private func next() {
        guard position < candidates.count else {
            let why = query.nobodyAnswered(failures)
            let done = RedisLoopBound(self.done)
            loop.execute { done.value(.failure(StoreError(.unavailable, why))) }
            return
        }
        let candidate = candidates[position]
        position += 1
        let connection = query.queryConnection(to: candidate, on: loop)
        connection.send(query.queryCommand) { [self] result in
            connection.close()
            switch result.flatMap({ query.answer($0, from: candidate) }) {
            case .success(let answer):
                query.answered(candidate, answer)
                done(.success(answer))
            case .failure(let why):
                failures.append("\(query.label(candidate)) \(why.detail)")
                next()
            }
        }
    }
}
