import Synchronization

/// A count that only goes up. Bumped from any thread with one relaxed atomic add: the request
/// path pays no lock and no allocation (series objects are looked up once, at set-up).
public final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    public init() {}

    @inline(__always) public func increment(by n: Int = 1) {
        value.wrappingAdd(n, ordering: .relaxed)
    }

    public var current: Int { value.load(ordering: .relaxed) }
}

/// A value that goes up and down (open connections).
public final class Gauge: Sendable {
    private let value = Atomic<Int>(0)

    public init() {}

    @inline(__always) public func increment() { value.wrappingAdd(1, ordering: .relaxed) }
    @inline(__always) public func decrement() { value.wrappingSubtract(1, ordering: .relaxed) }
    public func set(_ v: Int) { value.store(v, ordering: .relaxed) }

    public var current: Int { value.load(ordering: .relaxed) }
}

/// A latency histogram with fixed upper bounds, in seconds on the outside and nanoseconds
/// inside. Buckets are stored non-cumulatively (one atomic add per observation) and summed
/// when rendered, as Prometheus' cumulative `le` buckets.
public final class Histogram: Sendable {
    /// Upper bounds in seconds, ascending; +Inf is implicit.
    public let bounds: [Double]
    private let boundsNanos: [UInt64]
    /// bounds.count + 1 cells: the last one is +Inf.
    private let cells: [Counter]
    private let sumNanos = Atomic<UInt64>(0)

    /// Seconds: 1 ms … 10 s, for requests to an upstream or an identity provider.
    public static let latencyBuckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    public init(bounds: [Double] = Histogram.latencyBuckets) {
        precondition(!bounds.isEmpty && zip(bounds, bounds.dropFirst()).allSatisfy { $0 < $1 },
                     "histogram bounds must be ascending")
        self.bounds = bounds
        boundsNanos = bounds.map { UInt64(($0 * 1e9).rounded()) }
        cells = (0...bounds.count).map { _ in Counter() }
    }

    @inline(__always) public func observe(nanos: UInt64) {
        var i = 0
        while i < boundsNanos.count && nanos > boundsNanos[i] { i += 1 }
        cells[i].increment()
        sumNanos.wrappingAdd(nanos, ordering: .relaxed)
    }

    public func observe(seconds: Double) {
        observe(nanos: seconds <= 0 ? 0 : UInt64(min(seconds, 1e9) * 1e9))
    }

    /// Cumulative counts per bound (the last is +Inf, i.e. the total count) and the sum in seconds.
    /// Read without a lock: a scrape racing an observation may see the bucket and not the sum;
    /// Prometheus tolerates that skew, and each value on its own is exact.
    public var snapshot: (cumulative: [Int], sumSeconds: Double) {
        var running = 0
        let cumulative = cells.map { running += $0.current; return running }
        return (cumulative, Double(sumNanos.load(ordering: .relaxed)) / 1e9)
    }
}
