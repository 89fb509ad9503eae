import COpenSSL

/// Secret key bytes in memory that Swift will not copy around, wiped with `OPENSSL_cleanse`
/// when the last reference goes. Immutable after `init`, hence safe to share across threads.
final class SecretBytes: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer

    init(_ bytes: [UInt8]) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        bytes.withUnsafeBytes { storage.copyMemory(from: $0) }
        self.storage = storage
        count = bytes.count
    }

    let count: Int

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(UnsafeRawBufferPointer(start: storage.baseAddress, count: count))
    }

    deinit {
        OPENSSL_cleanse(storage.baseAddress, storage.count)
        storage.deallocate()
    }
}
