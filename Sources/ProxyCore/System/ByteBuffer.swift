#if canImport(Glibc)
import Glibc
#endif

/// A raw, growable byte buffer owned by exactly one connection (or one loop).
///
/// A struct over malloc'd memory rather than `[UInt8]`: the hot path must not pay for
/// copy-on-write checks, retain/release or bounds-checked generic indexing. The owner calls
/// `free()` exactly once (connections do it in `deinit`).
///
/// Layout: `[0, reader)` consumed, `[reader, writer)` readable, `[writer, capacity)` writable.
public struct ByteBuffer {
    public private(set) var base: UnsafeMutableRawPointer? = nil
    public private(set) var capacity: Int = 0
    public var reader: Int = 0
    public var writer: Int = 0

    public init() {}

    public init(capacity: Int) {
        base = malloc(capacity)!
        self.capacity = capacity
    }

    /// Takes ownership of `pointer` (from `BufferPool`).
    init(adopting pointer: UnsafeMutableRawPointer, capacity: Int) {
        base = pointer
        self.capacity = capacity
    }

    /// Drops the memory without freeing it (its new owner is a `BufferPool`).
    mutating func forget() {
        base = nil
        capacity = 0
        reader = 0
        writer = 0
    }

    @inline(__always) public var readable: Int { writer - reader }
    @inline(__always) public var isEmpty: Bool { writer == reader }
    @inline(__always) public var writable: Int { capacity - writer }

    /// The readable bytes. Valid until the next mutation.
    @inline(__always) public var readableBytes: UnsafeRawBufferPointer {
        guard let base else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base + reader, count: writer - reader)
    }

    @inline(__always) public var writePointer: UnsafeMutableRawPointer { base! + writer }

    /// Makes room for at least `count` more bytes: first by moving the readable bytes down
    /// over the consumed ones, then by growing.
    @inline(__always)
    public mutating func reserveWritable(_ count: Int) {
        if capacity - writer >= count { return }
        makeRoom(count)
    }

    @inline(never)
    private mutating func makeRoom(_ count: Int) {
        let live = writer - reader
        if reader > 0 && capacity - live >= count {
            if live > 0 { memmove(base!, base! + reader, live) }
        } else {
            var newCapacity = max(capacity, 4096)
            while newCapacity - live < count { newCapacity *= 2 }
            let fresh = malloc(newCapacity)!
            if live > 0 { memcpy(fresh, base! + reader, live) }
            Glibc.free(base)
            base = fresh
            capacity = newCapacity
        }
        writer = live
        reader = 0
    }

    @inline(__always) public mutating func moveReader(_ n: Int) {
        reader += n
        if reader == writer { reader = 0; writer = 0 }
    }

    @inline(__always) public mutating func clear() { reader = 0; writer = 0 }

    /// Returns the memory to the allocator (idle connections keep no buffers).
    public mutating func free() {
        Glibc.free(base)
        base = nil
        capacity = 0
        reader = 0
        writer = 0
    }

    @inline(__always)
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        let n = bytes.count
        guard n > 0 else { return }
        reserveWritable(n)
        memcpy(base! + writer, bytes.baseAddress!, n)
        writer += n
    }

    @inline(__always)
    public mutating func append(_ pointer: UnsafeRawPointer, count: Int) {
        append(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    @inline(__always)
    public mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public mutating func append(string: String) {
        var s = string
        s.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    @inline(__always)
    public mutating func append(byte: UInt8) {
        reserveWritable(1)
        base!.storeBytes(of: byte, toByteOffset: writer, as: UInt8.self)
        writer += 1
    }

    public mutating func append(decimal value: UInt64) {
        reserveWritable(20)
        if value == 0 { append(byte: 0x30); return }
        var digits = 0
        var v = value
        while v > 0 { digits += 1; v /= 10 }
        v = value
        var i = writer + digits - 1
        while v > 0 {
            base!.storeBytes(of: UInt8(0x30 + v % 10), toByteOffset: i, as: UInt8.self)
            v /= 10
            i -= 1
        }
        writer += digits
    }

    public mutating func append(hex value: UInt64) {
        reserveWritable(16)
        if value == 0 { append(byte: 0x30); return }
        var digits = 0
        var v = value
        while v > 0 { digits += 1; v >>= 4 }
        v = value
        var i = writer + digits - 1
        while v > 0 {
            let d = UInt8(v & 0xF)
            base!.storeBytes(of: d < 10 ? 0x30 + d : 0x57 + d, toByteOffset: i, as: UInt8.self)
            v >>= 4
            i -= 1
        }
        writer += digits
    }

    /// The readable bytes as a String (for tests and logs, not the hot path).
    public var string: String { String(decoding: readableBytes, as: UTF8.self) }
}
