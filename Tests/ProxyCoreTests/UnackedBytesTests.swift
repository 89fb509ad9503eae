import Testing
@testable import ProxyCore

/// The response bytes an HTTP/3 stream holds for nghttp3 until the client acknowledges them.
@Suite struct UnackedBytesTests {
    func bytes(_ n: Int, _ fill: UInt8) -> [UInt8] { [UInt8](repeating: fill, count: n) }

    @Test func aChunkIsACopyThatOutlivesItsSource() {
        var held = UnackedBytes()
        defer { held.release() }
        var source = bytes(100, 7)
        let chunk = source.withUnsafeBytes { held.keep(copying: $0) }
        for i in source.indices { source[i] = 0 }  // the output is reused
        #expect(Array(chunk) == bytes(100, 7))
        #expect(held.count == 100 && held.room == UnackedBytes.limit - 100)
    }

    @Test func acknowledgementsFreeTheChunksTheyCoverInOrder() {
        var held = UnackedBytes()
        defer { held.release() }
        for (n, fill) in [(100, 1), (200, 2), (300, 3)] as [(Int, UInt8)] {
            _ = bytes(n, fill).withUnsafeBytes { held.keep(copying: $0) }
        }
        #expect(held.count == 600 && held.chunksHeld == 3)
        held.acknowledge(150)  // all of the first, half of the second
        #expect(held.count == 450 && held.chunksHeld == 2)
        held.acknowledge(149)
        #expect(held.count == 301 && held.chunksHeld == 2)
        held.acknowledge(1)  // the second's last byte
        #expect(held.count == 300 && held.chunksHeld == 1)
        held.acknowledge(300)
        #expect(held.count == 0 && held.chunksHeld == 0 && held.room == UnackedBytes.limit)
    }

    @Test func moreAcknowledgedThanHeldIsClampedNotNegative() {
        var held = UnackedBytes()
        _ = bytes(10, 1).withUnsafeBytes { held.keep(copying: $0) }
        held.acknowledge(50)
        #expect(held.count == 0 && held.chunksHeld == 0)
        held.release()
    }

    @Test func manySmallChunksAcknowledgedOneByOneKeepTheListShort() {
        var held = UnackedBytes()
        defer { held.release() }
        for i in 0..<1000 { _ = bytes(10, UInt8(i % 256)).withUnsafeBytes { held.keep(copying: $0) } }
        for _ in 0..<990 { held.acknowledge(10) }
        #expect(held.count == 100 && held.chunksHeld == 10)
    }

    @Test func releaseFreesWhatIsLeftAndEmpties() {
        var held = UnackedBytes()
        _ = bytes(1000, 1).withUnsafeBytes { held.keep(copying: $0) }
        held.acknowledge(10)
        held.release()
        #expect(held.count == 0 && held.chunksHeld == 0)
    }
}
