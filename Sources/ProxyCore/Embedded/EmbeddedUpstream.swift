#if canImport(Glibc)
import Glibc
#endif

/// The app's side of an embedded exchange (`EmbeddedExchange`, and the HTTP/3 stream tests'
/// host): a unix socket the exchange's upstream connections reach, read and answered by hand,
/// never blocking — the caller turns the loop between calls (`pump`).
public final class EmbeddedUpstream {
    /// Where the exchange's upstream is pointed.
    let address: SocketAddress
    private let listener: Int32
    private var peers: [Int32] = []
    private let directory: String
    /// Bytes the app still has to write to its last connection (a large response goes out as
    /// the socket takes it).
    private var unsent: [UInt8] = []
    /// Everything the app has been sent, on all its connections.
    private(set) var received: [UInt8] = []
    /// The proxy closed the last connection the app accepted.
    private(set) var closedByProxy = false

    init() throws {
        var template = Array("/tmp/embedded-exchange.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemError(call: "mkdtemp", errno: errno) }
        directory = String(cString: made)
        let path = directory + "/upstream.sock"
        listener = try Socket.makeListener(.unix(path: path), backlog: 16, reusePort: false)
        address = .unix(path: path)
    }

    deinit {
        for fd in peers { close(fd) }
        close(listener)
        unlink(directory + "/upstream.sock")
        rmdir(directory)
    }

    /// A listener's context for `phases` and `config`, its upstream this socket, logging only
    /// errors and no access lines.
    func listener(named name: String, phases: any HTTPPhases, config: ProxyConfig) -> ListenerContext {
        var config = config
        config.upstream = UpstreamTarget(address: address)
        config.upstreamServers = []
        let spec = ListenerSpec(name: name, address: .ipv4(host: "127.0.0.1", port: 0), config: config,
                                phases: phases, accessLogged: false)
        return ListenerContext(spec: spec, loops: 1, log: Logger(level: .error), accessLog: nil,
                               metrics: EngineMetrics(registry: MetricsRegistry()))
    }

    /// Accepts the connections that came, reads what arrived, writes what it can of `unsent`.
    func pump() {
        var peer = PeerAddress(text: "127.0.0.1")!
        while let fd = try? Socket.accept(listener, peer: &peer) {
            peers.append(fd)
            closedByProxy = false
        }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        for fd in peers {
            while case .done(let n)? = try? chunk.withUnsafeMutableBytes({ try Socket.read(fd, into: $0.baseAddress!, count: $0.count) }) {
                if n == 0 {
                    if fd == peers.last { closedByProxy = true }
                    break
                }
                received += chunk[0..<n]
            }
        }
        if !unsent.isEmpty, let fd = peers.last {
            let n = unsent.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            if n > 0 { unsent.removeFirst(n) }
        }
    }

    /// The app answers `bytes` on the connection it last accepted (written as the socket takes
    /// them, by `pump`). False if it has accepted none.
    @discardableResult
    func respond(_ bytes: [UInt8]) -> Bool {
        guard !peers.isEmpty else { return false }
        unsent += bytes
        pump()
        return true
    }

    /// Everything is written.
    var sentAll: Bool { unsent.isEmpty }

    /// The app closes the connection it last accepted.
    func hangUp() {
        guard let fd = peers.popLast() else { return }
        close(fd)
    }

    /// Forgets what it was sent (the next request is read from empty).
    func clearReceived() { received.removeAll() }
}
