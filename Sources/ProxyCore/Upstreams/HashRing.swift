/// The consistent-hash ring of `balance: hash …` (after ketama, as nginx's `hash … consistent`
/// and HAProxy's `hash-type consistent`): each server owns 100 points per unit of weight,
/// placed by hashing its label, and a key goes to the first point at or after its hash whose
/// server may take it. A server that goes out hands only its own keys to the servers after
/// its points; when it comes back it takes the same keys back. Immutable: shared by the loops.
struct HashRing: Sendable {
    /// Points per unit of weight: enough that servers' shares stay within a few percent of their
    /// weights (`UpstreamBalanceTests`); 16 bytes each, so a group's ring is 1.6 KiB per unit of
    /// weight (64 servers of weight 1: 100 KiB; of weight 100: 10 MiB, built once per reload).
    static let pointsPerWeight = 100

    /// Sorted by hash.
    private let points: [(hash: UInt64, server: Int)]
    /// Servers that own points (a walk stops once it has asked each).
    private let owners: Int

    /// `servers`: each one's label and weight; backups (`false` in `eligible`) own no points.
    init(labels: [String], weights: [Int], eligible: [Bool]) {
        var points: [(hash: UInt64, server: Int)] = []
        for i in labels.indices where eligible[i] {
            for k in 0..<(weights[i] * Self.pointsPerWeight) {
                points.append((Self.hash(Array("\(labels[i])#\(k)".utf8)), i))
            }
        }
        owners = eligible.filter { $0 }.count
        self.points = points.sorted { $0.hash < $1.hash || $0.hash == $1.hash && $0.server < $1.server }
    }

    var isEmpty: Bool { points.isEmpty }

    /// The first server from `key`'s place on the ring, going round, for which `takes` is true;
    /// nil when none does.
    func server(for key: UInt64, where takes: (Int) -> Bool) -> Int? {
        guard !points.isEmpty else { return nil }
        var low = 0, high = points.count
        while low < high {
            let mid = (low + high) / 2
            if points[mid].hash < key { low = mid + 1 } else { high = mid }
        }
        var seen: UInt64 = 0
        for step in 0..<points.count {
            let s = points[(low + step) % points.count].server
            let bit: UInt64 = s < 64 ? 1 << UInt64(s) : 0
            if seen & bit != 0 { continue }
            if takes(s) { return s }
            seen |= bit
            if seen.nonzeroBitCount >= owners { break }
        }
        return nil
    }

    /// FNV-1a over the bytes, then a 64-bit finalizer (splitmix64's) so that keys that differ
    /// in their last byte land far apart on the ring.
    static func hash<C: Collection>(_ bytes: C) -> UInt64 where C.Element == UInt8 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        h ^= h >> 30
        h = h &* 0xbf58_476d_1ce4_e5b9
        h ^= h >> 27
        h = h &* 0x94d0_49bb_1331_11eb
        return h ^ (h >> 31)
    }
}
