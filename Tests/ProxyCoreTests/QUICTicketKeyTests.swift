import Testing
@testable import ProxyCore

/// The QUIC session-ticket key (`QUICTicketKey`): the same for the same limits, another when a
/// reload changes a limit a returning client's early data relies on, so its old ticket no longer
/// resumes.
@Suite struct QUICTicketKeyTests {
    static let secret = [UInt8](repeating: 7, count: QUICTicketKey.length)

    static func key(_ secret: [UInt8] = secret, _ change: (inout ProxyConfig) -> Void = { _ in }) -> [UInt8] {
        var config = ProxyConfig()
        change(&config)
        let key = QUICTicketKey(secret: secret, config: config)
        return Array(UnsafeBufferPointer(start: key.datum.pointee.data, count: Int(key.datum.pointee.size)))
    }

    @Test func theSameLimitsGiveTheSameKeyOfGnuTLSsSize() {
        #expect(Self.key().count == 64)
        #expect(Self.key() == Self.key())
        #expect(Self.key() != Self.key([UInt8](repeating: 8, count: 64)))
    }

    @Test func aChangedLimitChangesTheKey() {
        let before = Self.key()
        #expect(Self.key { $0.http3.maxStreams = 1 } != before)
        #expect(Self.key { $0.http3.streamWindow = 16 * 1024 } != before)
        #expect(Self.key { $0.http3.connectionWindow = 64 * 1024 } != before)
        #expect(Self.key { $0.limits.maxHeadBytes = 4 * 1024 } != before)
    }

    @Test func settingsNoClientReliesOnKeepTheKey() {
        let before = Self.key()
        #expect(Self.key { $0.http3.altSvcMaxAge = 60 } == before)
        #expect(Self.key { $0.http3.glitchBurst = 100 } == before)
        #expect(Self.key { $0.timeouts.clientHeader = 1_000_000_000 } == before)
    }

    /// A reload on the loop: the key changes in place (GnuTLS copied the old one into the
    /// sessions that had it), and only when a limit did.
    @Test func aReloadReplacesTheKeyInPlaceOnlyWhenALimitChanged() {
        var config = ProxyConfig()
        let key = QUICTicketKey(secret: Self.secret, config: config)
        let bytes = key.datum.pointee.data
        func current() -> [UInt8] { Array(UnsafeBufferPointer(start: key.datum.pointee.data, count: 64)) }
        let first = current()
        config.http3.altSvcMaxAge = 60
        key.use(config)
        #expect(current() == first)
        config.http3.maxStreams = 10
        key.use(config)
        #expect(current() != first)
        #expect(key.datum.pointee.data == bytes)
    }
}
