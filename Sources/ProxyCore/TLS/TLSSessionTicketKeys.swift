import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// Session ticket keys shared by a fleet (`tls.session_ticket_keys`): what lets a client that
/// resumes its session on another instance behind the balancer skip the full handshake, and
/// what lets the keys rotate without a restart.
///
/// The files are nginx's `ssl_session_ticket_key` format, so one key serves both during a
/// migration: 80 random bytes (`openssl rand 80 > ticket.key`), a 16-byte key name, then a
/// 32-byte HMAC-SHA256 key, then a 32-byte AES-256-CBC key (RFC 5077 §4's construction,
/// OpenSSL's own). The first file's key encrypts new tickets; every file's key decrypts, and a
/// ticket decrypted with any but the first is replaced by a fresh one. Rotation: put the new
/// file first, keep the old one second until the lifetime of the tickets it made has passed
/// (a TLS 1.3 ticket lives 2 hours here, OpenSSL's default), then drop it.
///
/// The bytes live in memory we allocate and wipe when a reload replaces them; they are never
/// logged and never leave through any interface.
final class TLSSessionTicketKeys: @unchecked Sendable {
    static let fileSize = 80
    static let nameLength = 16
    private static let hmacLength = 32
    private static let aesLength = 32

    // `@unchecked Sendable`: written once in `load`, only read afterwards (handshakes on any loop).
    private let bytes: UnsafeMutableRawPointer
    let count: Int

    private init(bytes: UnsafeMutableRawPointer, count: Int) {
        self.bytes = bytes
        self.count = count
    }

    deinit {
        OPENSSL_cleanse(bytes, count * Self.fileSize)
        bytes.deallocate()
    }

    /// Reads every file (in order: the first encrypts). Throws naming the file at fault.
    static func load(_ files: [String]) throws(TLSSetupError) -> TLSSessionTicketKeys {
        let bytes = UnsafeMutableRawPointer.allocate(byteCount: max(1, files.count) * fileSize, alignment: 16)
        let keys = TLSSessionTicketKeys(bytes: bytes, count: files.count)
        for (i, file) in files.enumerated() {
            try PEMFile.withBytes(file) { (raw: UnsafeRawBufferPointer) throws(TLSSetupError) in
                guard raw.count == fileSize else {
                    throw TLSSetupError(file: file, "is \(raw.count) bytes: a session ticket key is \(fileSize) random bytes (openssl rand 80 > FILE)")
                }
                (bytes + i * fileSize).copyMemory(from: raw.baseAddress!, byteCount: fileSize)
            }
        }
        for i in 0..<files.count {
            for j in 0..<i where memcmp(bytes + i * fileSize, bytes + j * fileSize, nameLength) == 0 {
                throw TLSSetupError(file: files[i], "has the same key name (first 16 bytes) as '\(files[j])'")
            }
        }
        return keys
    }

    /// Installs the ticket callback on `ctx`; `self` must outlive `ctx` (the generation owns both).
    func install(on ctx: OpaquePointer) {
        // Index 0 is OpenSSL's "app data" slot of an SSL_CTX; nothing else here uses it.
        SSL_CTX_set_ex_data(ctx, 0, Unmanaged.passUnretained(self).toOpaque())
        _ = SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx) { ssl, name, iv, cipher, hmac, encrypt in
            guard let ssl, let name, let iv, let cipher, let hmac, let ctx = SSL_get_SSL_CTX(ssl),
                  let me = SSL_CTX_get_ex_data(ctx, 0) else { return -1 }
            return Unmanaged<TLSSessionTicketKeys>.fromOpaque(me).takeUnretainedValue()
                .ticket(name: name, iv: iv, cipher: cipher, hmac: hmac, encrypt: encrypt == 1)
        }
    }

    /// OpenSSL's ticket key callback: 1 = use these keys, 2 = decrypted with an older key (issue
    /// a new ticket), 0 = unknown key name (a full handshake), -1 = failure.
    private func ticket(name: UnsafeMutablePointer<UInt8>, iv: UnsafeMutablePointer<UInt8>, cipher: OpaquePointer,
                        hmac: OpaquePointer, encrypt: Bool) -> Int32 {
        guard let algorithm = Self.aes256cbc else { return -1 }
        if encrypt {
            guard RAND_bytes(iv, Int32(EVP_CIPHER_get_iv_length(algorithm))) == 1 else { return -1 }
            memcpy(name, bytes, Self.nameLength)
            return use(0, cipher: cipher, hmac: hmac, iv: iv, encrypt: true) ? 1 : -1
        }
        for i in 0..<count where memcmp(name, bytes + i * Self.fileSize, Self.nameLength) == 0 {
            guard use(i, cipher: cipher, hmac: hmac, iv: iv, encrypt: false) else { return -1 }
            return i == 0 ? 1 : 2
        }
        return 0
    }

    private func use(_ i: Int, cipher: OpaquePointer, hmac: OpaquePointer, iv: UnsafeMutablePointer<UInt8>, encrypt: Bool) -> Bool {
        let key = (bytes + i * Self.fileSize).assumingMemoryBound(to: UInt8.self)
        let hmacKey = key + Self.nameLength
        let aesKey = hmacKey + Self.hmacLength
        let ok = encrypt ? EVP_EncryptInit_ex(cipher, Self.aes256cbc, nil, aesKey, iv) : EVP_DecryptInit_ex(cipher, Self.aes256cbc, nil, aesKey, iv)
        guard ok == 1, COpenSSL_EVP_MAC_CTX_init_hmac_sha256(hmac, hmacKey, Self.hmacLength) == 1 else {
            TLSErrorQueue.clear()
            return false
        }
        return true
    }

    /// Fetched once (an implicit fetch per handshake costs; see NOTES on `EVP_MD_fetch`).
    nonisolated(unsafe) private static let aes256cbc: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-CBC", nil)
}
