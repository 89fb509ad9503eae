/// A client address as a table key: a 64-bit hash with the process's random seed (Swift's
/// `Hasher`, SipHash), never 0 (0 marks an empty slot in `AtomicSlots`).
///
/// An IPv6 client is keyed by its /64: a subscriber gets a whole /64 from its carrier or ISP
/// and can pick any address in it, so keying by the full address would give one client 2^64
/// buckets. IPv4 addresses (and IPv4-mapped IPv6) are keyed whole.
public struct ClientKey: Sendable, Equatable {
    public let hash: UInt

    public init(_ address: PeerAddress) {
        var hasher = Hasher()
        hasher.combine(address.isV4)
        hasher.combine(address.bytes.0)
        self.init(hash: Self.nonZero(hasher.finalize()))
    }

    init(hash: UInt) { self.hash = hash }

    /// A client named by text that is not an address (an `X-Forwarded-For` entry such as
    /// `unknown` or `1.2.3.4:5678`, which `RequestView.clientAddress` returns as it is).
    public init(text: String) {
        if let address = PeerAddress(text: text) {
            self.init(address)
        } else {
            var hasher = Hasher()
            hasher.combine(text)
            self.init(hash: Self.nonZero(hasher.finalize()))
        }
    }

    private static func nonZero(_ h: Int) -> UInt {
        let u = UInt(bitPattern: h)
        return u == 0 ? 1 : u
    }
}
