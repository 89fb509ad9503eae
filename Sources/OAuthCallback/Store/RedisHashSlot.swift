/// Which of Redis Cluster's 16,384 hash slots a key belongs to (the Cluster specification's
/// "Key distribution model", followed literally): `CRC16(key) mod 16384`, where CRC16 is the
/// XMODEM variant (polynomial 0x1021, initial value 0, no reflection) and only the **hash
/// tag** is hashed when the key has one — the bytes between the first `{` and the first `}`
/// after it, if there is at least one byte between them.
///
/// Keys are slotted exactly as they are sent, the store's prefix included (`cbp:replay:…`).
/// Every store operation names one key, so no two keys ever need to share a slot; the store's
/// own keys carry no braces.
enum RedisHashSlot {
    static let count = 16_384

    static func slot(of key: [UInt8]) -> Int {
        key.withUnsafeBufferPointer { Int(crc16(hashed(by: $0)) & UInt16(count - 1)) }
    }

    /// The part of `key` that is hashed: its hash tag, or the whole key.
    static func hashed(by key: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")),
              let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")),
              close > open + 1 else { return key }
        return UnsafeBufferPointer(rebasing: key[(open + 1)..<close])
    }

    static func crc16(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    static func crc16(_ bytes: [UInt8]) -> UInt16 { bytes.withUnsafeBufferPointer { crc16($0) } }

    /// One entry per leading byte, computed once.
    private static let table: [UInt16] = (0..<256).map { byte in
        var crc = UInt16(byte) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}
