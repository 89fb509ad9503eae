import COpenSSL

/// Comparisons whose duration does not depend on where the inputs first differ.
public enum ConstantTime {
    /// True when both byte strings are equal. Lengths are not secret: different lengths
    /// return false at once; equal lengths are compared with `CRYPTO_memcmp`.
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in equals(x, y) } }
    }

    public static func equals(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in b.withUTF8 { y in equals(UnsafeRawBufferPointer(x), UnsafeRawBufferPointer(y)) } }
    }

    public static func equals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0, let pa = a.baseAddress, let pb = b.baseAddress else { return true }
        return CRYPTO_memcmp(pa, pb, a.count) == 0
    }
}
