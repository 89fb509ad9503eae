import CHiredis
import ProxyCore

/// A Redis reply, copied out of hiredis's reply object (which is freed right after).
package enum RedisReply: Equatable {
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
/// `package`: the fuzz targets (Sources/FuzzTargets) drive it too.
package final class RedisReplyParser {
    private var reader: UnsafeMutablePointer<redisReader>?
    private var bounds = RESPBounds()

    package enum Next {
        case reply(RedisReply)
        case needMore
        case protocolError(String)
    }

    /// A nil reader (out of memory) fails every call, which drops the connection.
    package init() { reader = redisReaderCreate() }

    deinit { close() }

    /// Frees the reader. Idempotent.
    func close() {
        guard let reader else { return }
        self.reader = nil
        redisReaderFree(reader)
    }

    /// Copies `bytes` into the reader (hiredis keeps them until they form replies). Returns
    /// the error when it cannot.
    package func feed(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let reader else { return "redis reader closed" }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        if let refused = bounds.scan(bytes) { return "redis protocol error: " + refused }
        if redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count) != REDIS_OK {
            return Self.error(reader)
        }
        return nil
    }

    /// The next complete reply, if the bytes fed so far hold one.
    package func next() -> Next {
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

/// Sizes a reply may declare, checked before hiredis sees the bytes. hiredis 0.14 (Debian's)
/// has no `maxelements`: `*288888882\r\n` (12 bytes) makes it `calloc` the whole element array
/// (2.3 GB) at once. The scan walks the stream's framing — each element is a type byte and a
/// CRLF-ended line, a bulk string's payload is skipped by its length — so no byte inside a
/// value is ever read as a header. Fed in any pieces, it carries its place across them.
struct RESPBounds {
    /// Nothing we ask for answers more than a handful of elements (the cluster slot map is
    /// the largest: a few per shard); 65,536 leaves room and bounds the array at 1 MiB.
    static let maxElements: Int64 = 65_536
    /// Store values are session records and codes, a few KiB: 16 MiB is far beyond any.
    static let maxBulkLength: Int64 = 16 << 20
    /// The longest length line a bound can need ("-1" to "16777216" and a sign).
    private static let maxDigits = 20

    private enum Place {
        /// The next byte is an element's type.
        case type
        /// Within the length line of a `*` (aggregate) or `$` (bulk) header.
        case length(aggregate: Bool, digits: [UInt8])
        /// Within a `+`, `-` or `:` line: skipped to its LF.
        case line
        /// Within a bulk string's payload and its CRLF.
        case payload(remaining: Int64)
    }

    private var place = Place.type

    /// Nil while the declared sizes are within bounds, else what is refused (the connection
    /// is then dropped: its stream is no longer trusted).
    mutating func scan(_ bytes: UnsafeRawBufferPointer) -> String? {
        var i = 0
        while i < bytes.count {
            switch place {
            case .type:
                switch bytes[i] {
                case UInt8(ascii: "*"): place = .length(aggregate: true, digits: [])
                case UInt8(ascii: "$"): place = .length(aggregate: false, digits: [])
                case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"): place = .line
                default: return "unexpected reply type byte \(bytes[i])"
                }
                i += 1
            case .line:
                guard let lf = (i..<bytes.count).first(where: { bytes[$0] == 0x0A }) else { return nil }
                place = .type
                i = lf + 1
            case .payload(let remaining):
                let take = Int(min(remaining, Int64(bytes.count - i)))
                i += take
                place = remaining == Int64(take) ? .type : .payload(remaining: remaining - Int64(take))
            case .length(let aggregate, var digits):
                let byte = bytes[i]
                i += 1
                guard byte == 0x0A else {
                    guard digits.count < Self.maxDigits else { return "reply length line too long" }
                    digits.append(byte)
                    place = .length(aggregate: aggregate, digits: digits)
                    continue
                }
                if digits.last == 0x0D { digits.removeLast() }
                guard let n = Int64(String(decoding: digits, as: UTF8.self)), n >= -1 else {
                    return "reply length is not a number"
                }
                if aggregate {
                    guard n <= Self.maxElements else { return "reply declares \(n) elements (at most \(Self.maxElements))" }
                    place = .type
                } else {
                    guard n <= Self.maxBulkLength else { return "reply declares a \(n)-byte string (at most \(Self.maxBulkLength))" }
                    place = n < 0 ? .type : .payload(remaining: n + 2)
                }
            }
        }
        return nil
    }
}
