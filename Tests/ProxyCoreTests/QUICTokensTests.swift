import Testing
@testable import ProxyCore

/// Address-validation and stateless-reset tokens on ngtcp2's formats, and when a Retry is asked for.
@Suite struct QUICTokensTests {
    static let tokens = QUICTokens(secret: Array(repeating: 7, count: 32))
    static let client = SocketAddress.ipv4(host: "192.0.2.10", port: 50_000)
    static let now: UInt64 = 1_800_000_000 * 1_000_000_000
    static let odcid: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
    static let scid: [UInt8] = Array(repeating: 0x42, count: 16)

    static func retry() -> [UInt8] {
        tokens.retryToken(client: client, originalDCID: odcid, retrySCID: scid, version: 1, now: now)!
    }

    @Test func aRetryTokenBringsBackTheInitialsConnectionID() {
        #expect(Self.tokens.validateRetryToken(Self.retry(), client: Self.client, dcid: Self.scid, version: 1, now: Self.now + 1_000_000_000)
                == Self.odcid)
    }

    @Test func aRetryTokenIsRefusedFromAnotherAddressForAnotherIDLateOrAltered() {
        let token = Self.retry()
        let t = Self.tokens
        #expect(t.validateRetryToken(token, client: .ipv4(host: "192.0.2.11", port: 50_000), dcid: Self.scid, version: 1, now: Self.now) == nil)
        #expect(t.validateRetryToken(token, client: .ipv4(host: "192.0.2.10", port: 50_001), dcid: Self.scid, version: 1, now: Self.now) == nil)
        #expect(t.validateRetryToken(token, client: Self.client, dcid: Array(repeating: 0x43, count: 16), version: 1, now: Self.now) == nil)
        #expect(t.validateRetryToken(token, client: Self.client, dcid: Self.scid, version: 1,
                                     now: Self.now + QUICTokens.retryLifetime + 1_000_000_000) == nil)
        var altered = token
        altered[altered.count - 1] ^= 1
        #expect(t.validateRetryToken(altered, client: Self.client, dcid: Self.scid, version: 1, now: Self.now) == nil)
        // Another process's secret.
        let other = QUICTokens(secret: Array(repeating: 8, count: 32))
        #expect(other.validateRetryToken(token, client: Self.client, dcid: Self.scid, version: 1, now: Self.now) == nil)
    }

    @Test func aRegularTokenIsGoodForItsAddressForAnHour() {
        let t = Self.tokens
        let token = t.regularToken(client: Self.client, now: Self.now)!
        #expect(t.validateRegularToken(token, client: Self.client, now: Self.now + 60 * 1_000_000_000))
        #expect(!t.validateRegularToken(token, client: .ipv6(host: "2001:db8::1", port: 50_000), now: Self.now))
        #expect(!t.validateRegularToken(token, client: Self.client, now: Self.now + QUICTokens.regularLifetime + 1))
        // A Retry token is not a regular one, nor the other way round.
        #expect(!t.validateRegularToken(Self.retry(), client: Self.client, now: Self.now))
        #expect(t.validateRetryToken(token, client: Self.client, dcid: Self.scid, version: 1, now: Self.now) == nil)
    }

    @Test func aStatelessResetTokenDependsOnTheIDAndTheSecretOnly() {
        let a = Self.tokens.statelessResetToken(for: Self.scid)
        #expect(a.count == 16)
        #expect(a == QUICTokens(secret: Array(repeating: 7, count: 32)).statelessResetToken(for: Self.scid))
        #expect(a != Self.tokens.statelessResetToken(for: Self.odcid))
        #expect(a != QUICTokens(secret: Array(repeating: 8, count: 32)).statelessResetToken(for: Self.scid))
    }

    @Test func aRetryIsAskedForAlwaysOrAboveTheThresholdNeverTwice() {
        #expect(QUICRetryPolicy(mode: .always).asksForRetry(handshakesInProgress: 0, addressValidated: false))
        #expect(!QUICRetryPolicy(mode: .always).asksForRetry(handshakesInProgress: 0, addressValidated: true))
        let flood = QUICRetryPolicy(mode: .aboveHandshakes(100))
        #expect(!flood.asksForRetry(handshakesInProgress: 99, addressValidated: false))
        #expect(flood.asksForRetry(handshakesInProgress: 100, addressValidated: false))
        #expect(!flood.asksForRetry(handshakesInProgress: 1_000, addressValidated: true))
    }
}
