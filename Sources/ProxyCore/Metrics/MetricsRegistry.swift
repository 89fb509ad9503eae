import Synchronization

/// The process's metrics, rendered in the Prometheus text format (version 0.0.4) by the
/// internal listener's `/metrics`. Families are registered at set-up; a family's labelled
/// series are created on first use and kept (label values come from configuration — provider
/// names, listener names — or from small fixed sets, never from requests).
///
/// Registering a family that exists (same name) returns the existing one, so a configuration
/// reload can rebuild what uses it while the counts go on.
public final class MetricsRegistry: Sendable {
    private let families = Mutex<[AnyFamily]>([])

    public init() {}

    public func counter(_ name: String, _ help: String, labels: [String] = []) -> MetricFamily<Counter> {
        register(name, labels) { MetricFamily(name: name, help: help, type: "counter", labels: labels) { Counter() } }
    }

    public func gauge(_ name: String, _ help: String, labels: [String] = []) -> MetricFamily<Gauge> {
        register(name, labels) { MetricFamily(name: name, help: help, type: "gauge", labels: labels) { Gauge() } }
    }

    public func histogram(_ name: String, _ help: String, labels: [String] = [],
                          bounds: [Double] = Histogram.latencyBuckets) -> MetricFamily<Histogram> {
        register(name, labels) {
            MetricFamily(name: name, help: help, type: "histogram", labels: labels) { Histogram(bounds: bounds) }
        }
    }

    /// A gauge whose value is computed at scrape time (start time, build info).
    public func gauge(_ name: String, _ help: String, labels: [String: String] = [:], value: @escaping @Sendable () -> Double) {
        scraped(name, help, type: "gauge", labels: { labels }, value: value)
    }

    /// A counter kept elsewhere (by a component that knows no registry), read at scrape time.
    public func counter(_ name: String, _ help: String, value: @escaping @Sendable () -> Double) {
        scraped(name, help, type: "counter", labels: { [:] }, value: value)
    }

    /// An info gauge (value 1) whose label's value is read at scrape time, such as the address
    /// a connection currently uses; no sample at all while `value` is nil.
    public func info(_ name: String, _ help: String, label: String, value: @escaping @Sendable () -> String?) {
        families.withLock { list in
            precondition(!list.contains { $0.name == name }, "metric \(name) registered twice")
            list.append(AnyFamily(name: name, family: nil) { out in
                out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
                if let v = value() { out += name + Self.labelText([(label, v)]) + " 1\n" }
            })
        }
    }

    /// Gauges with one label whose series are read at scrape time, for a set that a reload may
    /// change (the loops): registering the name again replaces the reader.
    public func gauges(_ name: String, _ help: String, label: String,
                       values: @escaping @Sendable () -> [(String, Double)]) {
        gauges(name, help, labels: [label]) { values().map { ([$0.0], $0.1) } }
    }

    /// The same with several labels (`labels`' values in that order, per series): the upstream
    /// servers of every group, which a reload may change.
    public func gauges(_ name: String, _ help: String, labels: [String],
                       values: @escaping @Sendable () -> [([String], Double)]) {
        let family = AnyFamily(name: name, family: nil) { out in
            out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
            for (v, x) in values() { out += name + Self.labelText(Array(zip(labels, v))) + " " + Self.number(x) + "\n" }
        }
        families.withLock { list in
            if let i = list.firstIndex(where: { $0.name == name }) { list[i] = family } else { list.append(family) }
        }
    }

    private func scraped(_ name: String, _ help: String, type: String, labels: @escaping @Sendable () -> [String: String],
                         value: @escaping @Sendable () -> Double) {
        families.withLock { list in
            precondition(!list.contains { $0.name == name }, "metric \(name) registered twice")
            list.append(AnyFamily(name: name, family: nil) { out in
                out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
                out += name + Self.labelText(labels().sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
                    + " " + Self.number(value()) + "\n"
            })
        }
    }

    private func register<M>(_ name: String, _ labels: [String], _ make: () -> MetricFamily<M>) -> MetricFamily<M> {
        families.withLock { list in
            if let existing = list.first(where: { $0.name == name }) {
                // Another type or other labels under one name: a wiring bug Prometheus would reject.
                guard let same = existing.family as? MetricFamily<M>, same.labelNames == labels else {
                    preconditionFailure("metric \(name) registered twice with different types or labels")
                }
                return same
            }
            let family = make()
            list.append(AnyFamily(name: name, family: family) { family.render(into: &$0) })
            return family
        }
    }

    /// The whole exposition, families in registration order.
    public func render() -> String {
        let list = families.withLock { $0 }
        var out = ""
        for family in list { family.render(&out) }
        return out
    }

    static func labelText(_ pairs: [(String, String)]) -> String {
        if pairs.isEmpty { return "" }
        return "{" + pairs.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",") + "}"
    }

    /// Label values escape `\`, `"` and newline (exposition format).
    static func escape(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func number(_ v: Double) -> String {
        if v == v.rounded() && abs(v) < 1e15 { return String(Int64(v)) }
        return String(v)
    }
}

private struct AnyFamily: Sendable {
    let name: String
    let family: (any Sendable)?
    let render: @Sendable (inout String) -> Void
}

/// A metric name with its label names; one series per distinct label-value list.
public final class MetricFamily<Metric: Sendable>: Sendable {
    public let name: String
    let help: String
    let type: String
    let labelNames: [String]
    private let make: @Sendable () -> Metric
    private let series = Mutex<[(values: [String], metric: Metric)]>([])

    init(name: String, help: String, type: String, labels: [String], make: @escaping @Sendable () -> Metric) {
        self.name = name
        self.help = help
        self.type = type
        labelNames = labels
        self.make = make
    }

    /// The series for these label values (created at zero on first use). Look series up once
    /// and keep them: this takes a lock.
    public func labels(_ values: String...) -> Metric { labels(values) }

    public func labels(_ values: [String]) -> Metric {
        precondition(values.count == labelNames.count, "\(name) takes labels \(labelNames)")
        return series.withLock { list in
            if let found = list.first(where: { $0.values == values }) { return found.metric }
            let metric = make()
            list.append((values, metric))
            return metric
        }
    }

    /// Drops the series whose label values `keep` refuses: a reload that removes a provider
    /// removes its series rather than leaving its last value to be scraped for ever.
    public func retainSeries(_ keep: ([String]) -> Bool) {
        series.withLock { $0.removeAll { !keep($0.values) } }
    }

    func render(into out: inout String) {
        let list = series.withLock { $0 }.sorted { $0.values.lexicographicallyPrecedes($1.values) }
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        for (values, metric) in list {
            let pairs = Array(zip(labelNames, values))
            switch metric {
            case let c as Counter:
                out += name + MetricsRegistry.labelText(pairs) + " \(c.current)\n"
            case let g as Gauge:
                out += name + MetricsRegistry.labelText(pairs) + " \(g.current)\n"
            case let h as Histogram:
                let (cumulative, sum) = h.snapshot
                for (i, bound) in h.bounds.enumerated() {
                    out += name + "_bucket" + MetricsRegistry.labelText(pairs + [("le", MetricsRegistry.number(bound))])
                        + " \(cumulative[i])\n"
                }
                out += name + "_bucket" + MetricsRegistry.labelText(pairs + [("le", "+Inf")]) + " \(cumulative.last!)\n"
                out += name + "_sum" + MetricsRegistry.labelText(pairs) + " \(MetricsRegistry.number(sum))\n"
                out += name + "_count" + MetricsRegistry.labelText(pairs) + " \(cumulative.last!)\n"
            default:
                break
            }
        }
    }
}
