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

    @Test func reservingSpaceKeepsPinnedBytesAndReportsHowFarTheyMoved() {
        var b = ByteBuffer(capacity: 4096)
        defer { b.free() }
        b.append(string: String(repeating: "h", count: 100))   // a pinned head
        b.append(string: String(repeating: "x", count: 3900))
        b.reader = 100 + 3900                                   // all body bytes consumed
        let moved = b.reserveWritable(1000, keepFrom: 0)
        #expect(moved == 0, "pinned bytes at 0 cannot move down")
        #expect(b.capacity >= 5000)
        var c = ByteBuffer(capacity: 4096)
        defer { c.free() }
        c.append(string: String(repeating: "a", count: 2000))
        c.append(string: "HEAD")
        c.reader = 2004
        c.append(string: "tail")
        let shift = c.reserveWritable(3000, keepFrom: 2000)
        #expect(shift == 2000)
        #expect(c.reader == 4)
        #expect(c.string == "tail")
        let pinned = UnsafeRawBufferPointer(start: c.base!, count: 4)
        #expect(String(decoding: pinned, as: UTF8.self) == "HEAD")
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
