import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG (seeded from the kernel).
public enum SecureRandom {
    public static func bytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "SecureRandom.bytes: count out of range")
        var out = [UInt8](repeating: 0, count: count)
        try fill(&out)
        return out
    }

    public static func fill(_ buffer: inout [UInt8]) throws(CryptoError) {
        guard !buffer.isEmpty else { return }
        let ok = buffer.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        guard ok == 1 else { throw .openSSL(.randomUnavailable, "RAND_bytes") }
    }
}
