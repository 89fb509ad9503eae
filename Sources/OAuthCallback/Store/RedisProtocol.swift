import CHiredis
import ProxyCore

/// A Redis reply, copied out of hiredis's reply object (which is freed right after).
enum RedisReply: Equatable {
    case string([UInt8])
    case status(String)
    case integer(Int64)
    case null
    case error(String)
    case array([RedisReply])

    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            self = .string(r.str.map { Array(UnsafeRawBufferPointer(start: $0, count: r.len)) } ?? [])
        case REDIS_REPLY_STATUS:
            self = .status(r.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: r.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_ERROR:
            self = .error(r.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: r.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            var items: [RedisReply] = []
            for i in 0..<r.elements {
                if let e = r.element[i] { items.append(RedisReply(e)) } else { items.append(.null) }
            }
            self = .array(items)
        default:
            self = .null
        }
    }
}

/// The single Swift owner of one connection's hiredis reader: the RESP parser alone, with no
/// I/O of its own (bytes come from our `OutboundStream`, plain or TLS). One per connection:
/// after a protocol error or a dropped connection its state is meaningless.
final class RedisReplyParser {
    private var reader: UnsafeMutablePointer<redisReader>?

    enum Next {
        case reply(RedisReply)
        case needMore
        case protocolError(String)
    }

    /// A nil reader (out of memory) fails every call, which drops the connection.
    init() { reader = redisReaderCreate() }

    deinit { close() }

    /// Frees the reader. Idempotent.
    func close() {
        guard let reader else { return }
        self.reader = nil
        redisReaderFree(reader)
    }

    /// Copies `bytes` into the reader (hiredis keeps them until they form replies). Returns
    /// the error when it cannot.
    func feed(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let reader else { return "redis reader closed" }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        if redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count) != REDIS_OK {
            return Self.error(reader)
        }
        return nil
    }

    /// The next complete reply, if the bytes fed so far hold one.
    func next() -> Next {
        guard let reader else { return .protocolError("redis reader closed") }
        var raw: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &raw) == REDIS_OK else { return .protocolError(Self.error(reader)) }
        guard let raw else { return .needMore }
        defer { freeReplyObject(raw) }
        return .reply(RedisReply(raw.assumingMemoryBound(to: redisReply.self)))
    }

    private static func error(_ reader: UnsafeMutablePointer<redisReader>) -> String {
        "redis protocol error: " + withUnsafeBytes(of: reader.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}

/// Commands in RESP (an array of bulk strings: binary-safe, explicit lengths), written
/// straight into a connection's output buffer.
enum RedisCommandEncoding {
    static func append(_ args: [[UInt8]], to out: inout ByteBuffer) {
        out.append(byte: UInt8(ascii: "*"))
        out.append(decimal: UInt64(args.count))
        out.append("\r\n")
        for arg in args {
            out.append(byte: UInt8(ascii: "$"))
            out.append(decimal: UInt64(arg.count))
            out.append("\r\n")
            arg.withUnsafeBytes { out.append($0) }
            out.append("\r\n")
        }
    }
}
