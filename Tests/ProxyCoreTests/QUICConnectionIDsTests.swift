import Testing
@testable import ProxyCore

/// Connection IDs that name their loop, and datagrams routed by them, without sockets.
@Suite struct QUICConnectionIDsTests {
    static let key: [UInt8] = Array(0..<16)
    static func random(_ seed: UInt8) -> [UInt8] { (0..<13).map { UInt8(truncatingIfNeeded: Int($0) * 7 + Int(seed)) } }

    /// A version 1 long-header packet (an Initial's first bytes) to `dcid`.
    static func long(_ dcid: [UInt8], version: [UInt8] = [0, 0, 0, 1]) -> [UInt8] {
        [0xC0] + version + [UInt8(dcid.count)] + dcid + [8] + Array(repeating: 0xAB, count: 8) + Array(repeating: 0, count: 40)
    }

    static func short(_ dcid: [UInt8]) -> [UInt8] { [0x40] + dcid + Array(repeating: 0x11, count: 30) }

    static func route(_ datagram: [UInt8], _ ids: QUICConnectionIDs, loops: Int = 4) -> QUICDatagramRoute {
        datagram.withUnsafeBytes { QUICDatagramRoute.of($0, ids: ids, loops: loops) }
    }

    @Test func anIDNamesItsLoopToEveryLoopOfTheProcess() {
        let a = QUICConnectionIDs(key: Self.key), b = QUICConnectionIDs(key: Self.key)
        for loop in [0, 1, 3, 255] {
            let id = a.make(loop: loop, random: Self.random(UInt8(loop)))
            #expect(id.count == 16)
            #expect(id.withUnsafeBytes { b.loop(of: $0) } == loop)
        }
    }

    @Test func idsOfOneLoopShareNoVisibleBytes() {
        let ids = QUICConnectionIDs(key: Self.key)
        let one = ids.make(loop: 2, random: Self.random(1)), two = ids.make(loop: 2, random: Self.random(2))
        // The loop number and the fixed bytes are not in the clear: no position agrees.
        #expect(zip(one, two).filter { $0 == $1 }.count <= 2)
        #expect(one[0] != 2 || two[0] != 2)
    }

    @Test func anotherProcessesKeyOrAClientsIDNamesNoLoop() {
        let ours = QUICConnectionIDs(key: Self.key), theirs = QUICConnectionIDs(key: Array(repeating: 9, count: 16))
        let id = theirs.make(loop: 1, random: Self.random(3))
        #expect(id.withUnsafeBytes { ours.loop(of: $0) } == nil)
        #expect([UInt8](repeating: 0x5A, count: 16).withUnsafeBytes { ours.loop(of: $0) } == nil)
        #expect([UInt8](repeating: 0x5A, count: 8).withUnsafeBytes { ours.loop(of: $0) } == nil)
    }

    @Test func datagramsGoToTheLoopTheirIDNames() {
        let ids = QUICConnectionIDs(key: Self.key)
        let id = ids.make(loop: 3, random: Self.random(4))
        #expect(Self.route(Self.short(id), ids) == .loop(3))
        #expect(Self.route(Self.long(id), ids) == .loop(3))
        // A client's own first ID (8 bytes here, any length in an Initial): this loop.
        #expect(Self.route(Self.long([1, 2, 3, 4, 5, 6, 7, 8]), ids) == .here)
        #expect(Self.route(Self.short(Array(repeating: 7, count: 16)), ids) == .here)
        // A loop the process does not run (a configuration with fewer loops): this loop.
        #expect(Self.route(Self.short(ids.make(loop: 9, random: Self.random(5))), ids, loops: 4) == .here)
    }

    @Test func whatCannotBeAQUICPacketIsDropped() {
        let ids = QUICConnectionIDs(key: Self.key)
        #expect(Self.route([], ids) == .drop)
        #expect(Self.route([0xC0, 0, 0, 0, 1], ids) == .drop)             // cut in its header
        #expect(Self.route([0x40] + Array(repeating: 1, count: 10), ids) == .drop)  // short, no room for our ID
        #expect(Self.route([0xC0, 0, 0, 0, 1, 21] + Array(repeating: 1, count: 60), ids) == .drop)  // v1 DCID > 20
        #expect(Self.route([0xC0, 0x6b, 0x33, 0x43, 0xcf, 21] + Array(repeating: 1, count: 60), ids) == .drop)  // v2 too
        #expect(Self.route([0xC0, 0, 0, 0, 1, 30, 1, 2], ids) == .drop)     // longer than the datagram
        // Another version may carry a longer ID: it gets version negotiation here, not a drop.
        #expect(Self.route(Self.long(Array(repeating: 1, count: 30), version: [0xFF, 0, 0, 0x1D]), ids) == .here)
    }
}

/// Connection IDs as the connection table's keys.
@Suite struct QUICConnectionKeyTests {
    @Test func equalBytesAreEqualKeysAndEveryByteAndTheLengthCount() {
        let id = (0..<20).map { UInt8($0 + 1) }
        #expect(QUICConnectionKey(id) == QUICConnectionKey(id))
        for i in id.indices {
            var other = id
            other[i] ^= 0xff
            #expect(QUICConnectionKey(other) != QUICConnectionKey(id), "byte \(i)")
        }
        // A shorter ID is another key, even where its bytes are a prefix (or zero-padded).
        #expect(QUICConnectionKey(Array(id.prefix(8))) != QUICConnectionKey(Array(id.prefix(9))))
        #expect(QUICConnectionKey([0, 0]) != QUICConnectionKey([0, 0, 0]))
        #expect(QUICConnectionKey([]) != nil)
    }

    @Test func moreThanTwentyBytesIsNoKey() {
        #expect(QUICConnectionKey([UInt8](repeating: 1, count: 21)) == nil)
    }

    @Test func keysFindTheirValues() {
        var table: [QUICConnectionKey: Int] = [:]
        for n in 1...20 { table[QUICConnectionKey([UInt8](repeating: UInt8(n), count: n))!] = n }
        for n in 1...20 { #expect(table[QUICConnectionKey([UInt8](repeating: UInt8(n), count: n))!] == n) }
    }
}
