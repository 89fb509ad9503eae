import COpenSSL

/// SHA-256 (FIPS 180-4) with the cached OpenSSL digest.
public enum SHA256 {
    public static let digestSize = 32

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { hash($0) }
    }

    public static func hash(_ text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    public static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: digestSize)
        var length: UInt32 = 0
        let ok = digest.withUnsafeMutableBufferPointer { out in
            EVP_Digest(bytes.baseAddress, bytes.count, out.baseAddress, &length,
                       OpenSSLAlgorithms.shared.sha256, nil)
        }
        // EVP_Digest on a fetched SHA-256 only fails on allocation failure.
        guard ok == 1, length == UInt32(digestSize) else {
            fatalError("EVP_Digest(SHA256) failed: \(OpenSSLErrorQueue.drain() ?? "no reason")")
        }
        return digest
    }
}
