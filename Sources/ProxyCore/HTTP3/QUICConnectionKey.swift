/// A connection ID as a dictionary key, its bytes held inline (at most 20, RFC 9000 §17.2): the
/// connection table is looked up once per datagram, and an array key would allocate each time.
struct QUICConnectionKey: Hashable {
    private var a: UInt64 = 0
    private var b: UInt64 = 0
    private var c: UInt32 = 0
    private var length: UInt8 = 0

    /// Nil for more than 20 bytes (no QUIC version this server speaks has such IDs).
    init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= 20 else { return nil }
        length = UInt8(bytes.count)
        withUnsafeMutableBytes(of: &a) { x in
            withUnsafeMutableBytes(of: &b) { y in
                withUnsafeMutableBytes(of: &c) { z in
                    for (i, byte) in bytes.enumerated() {
                        if i < 8 { x[i] = byte } else if i < 16 { y[i - 8] = byte } else { z[i - 16] = byte }
                    }
                }
            }
        }
    }

    init?(_ bytes: [UInt8]) {
        guard let key = bytes.withUnsafeBytes({ QUICConnectionKey($0) }) else { return nil }
        self = key
    }
}
