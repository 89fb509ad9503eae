import Testing
@testable import ProxyCore

@Suite struct ByteBufferTests {
    @Test func appendedNumbersAreWrittenInDecimalAndHex() {
        var b = ByteBuffer()
        defer { b.free() }
        b.append(decimal: 0); b.append(byte: 0x20)
        b.append(decimal: 1234567890123); b.append(byte: 0x20)
        b.append(decimal: UInt64.max); b.append(byte: 0x20)
        b.append(hex: 0); b.append(byte: 0x20)
        b.append(hex: 0xdeadbeef); b.append(byte: 0x20)
        b.append(hex: UInt64.max)
        #expect(b.string == "0 1234567890123 18446744073709551615 0 deadbeef ffffffffffffffff")
    }

    @Test func reservingSpaceKeepsTheReadableBytesAndDropsTheConsumedOnes() {
        var b = ByteBuffer(capacity: 4096)
        defer { b.free() }
        b.append(string: String(repeating: "x", count: 3000))
        b.append("tail")
        b.reader = 3000                                   // all but "tail" consumed
        b.reserveWritable(3000)                           // fits after moving "tail" down
        #expect(b.capacity == 4096)
        #expect(b.reader == 0 && b.string == "tail")
        b.append(string: String(repeating: "y", count: 4092))
        b.reserveWritable(100)                            // full: must grow, keeping everything
        #expect(b.capacity >= 4196)
        #expect(b.readable == 4096 && b.string.hasPrefix("taily") && b.string.hasSuffix("yyy"))
    }

    @Test func freeingReturnsToAnEmptyUsableState() {
        var b = ByteBuffer()
        b.append("abc")
        b.free()
        #expect(b.capacity == 0 && b.isEmpty)
        b.append("de")
        #expect(b.string == "de")
        b.free()
    }
}
