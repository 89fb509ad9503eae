/// base64url without padding (RFC 4648 §5, RFC 7515 §2): the JOSE and cookie encoding.
/// Decoding is strict — see `Base64`.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String { Base64.encode(bytes, .urlUnpadded) }
    public static func encode(_ text: String) -> String { Base64.encode(Array(text.utf8), .urlUnpadded) }
    public static func encode(_ bytes: UnsafeRawBufferPointer) -> String { Base64.encode(bytes, .urlUnpadded) }

    public static func decode(_ text: String) -> [UInt8]? { Base64.decode(text, .urlUnpadded) }
    public static func decode(_ bytes: ArraySlice<UInt8>) -> [UInt8]? { Base64.decode(bytes, .urlUnpadded) }
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? { Base64.decode(bytes, .urlUnpadded) }
}
