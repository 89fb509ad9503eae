import COpenSSL

/// HMAC-SHA256 (RFC 2104) through `EVP_MAC`. Used for Facebook's `appsecret_proof`
/// (hex of HMAC-SHA256(app secret, access token)) and anything else that needs a keyed MAC.
public enum HMACSHA256 {
    public static let macSize = 32

    public static func authenticationCode(for message: [UInt8], key: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { k in message.withUnsafeBytes { m in authenticationCode(for: m, key: k) } }
    }

    public static func authenticationCode(for message: String, key: String) -> [UInt8] {
        authenticationCode(for: Array(message.utf8), key: Array(key.utf8))
    }

    public static func authenticationCode(for message: UnsafeRawBufferPointer,
                                          key: UnsafeRawBufferPointer) -> [UInt8] {
        // Failures here are allocation failures only: the template is known good.
        guard let ctx = OpenSSLPointer(EVP_MAC_CTX_dup(OpenSSLAlgorithms.shared.hmacSHA256Template),
                                       free: { EVP_MAC_CTX_free($0) }) else {
            fatalError("EVP_MAC_CTX_dup failed")
        }
        // A NULL key means "keep the previous key" to EVP_MAC_init, so an empty key still
        // needs a valid address.
        var empty: UInt8 = 0
        let initialised = withUnsafePointer(to: &empty) { emptyAddress in
            EVP_MAC_init(ctx.pointer,
                         key.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyAddress,
                         key.count, nil)
        }
        guard initialised == 1,
              EVP_MAC_update(ctx.pointer, message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                             message.count) == 1 else {
            fatalError("HMAC-SHA256 failed: \(OpenSSLErrorQueue.drain() ?? "no reason")")
        }
        var mac = [UInt8](repeating: 0, count: macSize)
        var length = 0
        let finished = mac.withUnsafeMutableBufferPointer { out in
            EVP_MAC_final(ctx.pointer, out.baseAddress, &length, out.count)
        }
        guard finished == 1, length == macSize else {
            fatalError("EVP_MAC_final failed: \(OpenSSLErrorQueue.drain() ?? "no reason")")
        }
        return mac
    }
}
