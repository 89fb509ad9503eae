import COpenSSL
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// OCSP stapling for one certificate (`tls.ocsp_stapling`): the proof of "not revoked" that a
/// client would otherwise fetch from the CA itself — slowly, over a network phone users pay for,
/// and telling the CA which sites they visit. The engine only builds the request, checks the
/// answer and staples it; fetching it is the application's (`OCSPRefresher`, libcurl, off the
/// serving loops), so a slow or dead responder never delays a handshake: without a good
/// response, handshakes go on without a staple.
///
/// A response is stapled only when it is signed by the certificate's issuer (or a responder the
/// issuer delegated to), names this certificate, says `good`, and is within its validity
/// (`thisUpdate`/`nextUpdate`, 5 minutes of leeway). A `revoked` answer is not stapled
/// (nginx's choice too): the operator hears of it at error level instead.
///
/// `@unchecked Sendable`: `leaf` and `issuer` are immutable once built (OpenSSL allows
/// concurrent reads of an X509); the stapled bytes are behind a lock.
public final class OCSPStaple: @unchecked Sendable {
    /// The responder named in the certificate (Authority Information Access); nil: none.
    public let responderURL: String?
    /// The certificate's subject, for logs and metrics.
    public let subject: String
    /// The certificate (DER): the same certificate across reloads keeps its response.
    let certificateDER: [UInt8]
    private let leaf: OpaquePointer
    private let issuer: OpaquePointer?
    private let response = Mutex<Stapled?>(nil)

    struct Stapled {
        var der: [UInt8]
        /// Seconds since the epoch.
        var nextUpdate: Int64?
    }

    /// Takes a reference to `leaf` and to the first of `chain` that issued it.
    init(leaf: OpaquePointer, chain: [OpaquePointer]) {
        X509_up_ref(leaf)
        self.leaf = leaf
        var found: OpaquePointer? = nil
        for c in chain where X509_check_issued(c, leaf) == X509_V_OK {
            X509_up_ref(c)
            found = c
            break
        }
        issuer = found
        var url = [CChar](repeating: 0, count: 2048)
        responderURL = COpenSSL_first_ocsp_url(leaf, &url, url.count) == 1
            ? url.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : nil
        subject = TLSServerContext.describe(leaf).0
        var length: Int32 = 0
        var der: UnsafeMutablePointer<UInt8>? = nil
        length = i2d_X509(leaf, &der)
        if length > 0, let der {
            certificateDER = Array(UnsafeBufferPointer(start: der, count: Int(length)))
            COpenSSL_free(der)
        } else {
            certificateDER = []
        }
        TLSErrorQueue.clear()
    }

    deinit {
        X509_free(leaf)
        if let issuer { X509_free(issuer) }
    }

    /// Why this certificate cannot be stapled at all (nil: it can).
    public var unstapleable: String? {
        if responderURL == nil { return "the certificate names no OCSP responder (Authority Information Access)" }
        if issuer == nil { return "the certificate file holds no issuer certificate after the leaf (needed to ask and to verify the responder)" }
        return nil
    }

    /// Whether a response is stapled now.
    public var isStapled: Bool { response.withLock { $0 != nil } }

    /// The stapled response's `nextUpdate` (seconds since the epoch); nil: none stapled, or
    /// one without a `nextUpdate`.
    public var expiry: Int64? { response.withLock { $0?.nextUpdate } }

    /// What a handshake at `now` (seconds since the epoch) staples: nothing from the response's
    /// `nextUpdate` on, whether or not the refresher has dropped it yet (strict clients refuse
    /// an expired staple, and nginx stops there too).
    func stapledResponse(at now: Int64) -> [UInt8]? {
        response.withLock { r in
            guard let r, !r.der.isEmpty else { return nil }
            if let next = r.nextUpdate, next <= now { return nil }
            return r.der
        }
    }

    /// The DER OCSP request for this certificate (SHA-1 certificate id, as responders expect),
    /// or nil when it cannot be built.
    public func request() -> [UInt8]? {
        guard let issuer, let id = OCSP_cert_to_id(nil, leaf, issuer) else { TLSErrorQueue.clear(); return nil }
        guard let req = OCSP_REQUEST_new() else { OCSP_CERTID_free(id); return nil }
        defer { OCSP_REQUEST_free(req) }
        guard OCSP_request_add0_id(req, id) != nil else { OCSP_CERTID_free(id); TLSErrorQueue.clear(); return nil }
        var der: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_OCSP_REQUEST(req, &der)
        guard length > 0, let der else { TLSErrorQueue.clear(); return nil }
        defer { COpenSSL_free(der) }
        return Array(UnsafeBufferPointer(start: der, count: Int(length)))
    }

    /// What a responder's answer said.
    public enum Verdict: Equatable, Sendable {
        /// Good and verified: stapled from now on. `nextUpdate` in seconds since the epoch.
        case stapled(thisUpdate: Int64?, nextUpdate: Int64?)
        case revoked
        case refused(String)
    }

    /// Checks a responder's DER answer and staples it when it is good (`now`: seconds since the
    /// epoch). Anything else leaves the stapled response as it was, unless it has expired.
    public func accept(_ der: [UInt8], now: Int64) -> Verdict {
        defer { TLSErrorQueue.clear() }
        guard let issuer else { return .refused("no issuer certificate") }
        let verdict: Verdict = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let resp = d2i_OCSP_RESPONSE(nil, &p, buffer.count) else { return .refused("not an OCSP response") }
            defer { OCSP_RESPONSE_free(resp) }
            let status = OCSP_response_status(resp)
            guard status == OCSP_RESPONSE_STATUS_SUCCESSFUL else { return .refused("responder status \(status)") }
            guard let basic = OCSP_response_get1_basic(resp) else { return .refused("no basic response") }
            defer { OCSP_BASICRESP_free(basic) }
            guard let store = X509_STORE_new() else { return .refused("out of memory") }
            defer { X509_STORE_free(store) }
            // The issuer is the trust anchor (an intermediate, hence PARTIAL_CHAIN): the response
            // is signed by it, or by a responder certificate it issued for OCSP signing.
            X509_STORE_add_cert(store, issuer)
            X509_STORE_set_flags(store, UInt(X509_V_FLAG_PARTIAL_CHAIN))
            guard let certs = COpenSSL_sk_X509_of(issuer) else { return .refused("out of memory") }
            defer { COpenSSL_sk_X509_free(certs) }
            guard OCSP_basic_verify(basic, certs, store, UInt(OCSP_TRUSTOTHER)) == 1 else {
                return .refused("signature does not verify against the issuer (\(TLSErrorQueue.drain() ?? "unknown"))")
            }
            guard let id = OCSP_cert_to_id(nil, leaf, issuer) else { return .refused("cannot build the certificate id") }
            defer { OCSP_CERTID_free(id) }
            var certStatus: Int32 = -1, reason: Int32 = -1
            var revoked: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
            var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
            var nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>? = nil
            guard OCSP_resp_find_status(basic, id, &certStatus, &reason, &revoked, &thisUpdate, &nextUpdate) == 1 else {
                return .refused("the response does not name this certificate")
            }
            if certStatus == V_OCSP_CERTSTATUS_REVOKED { return .revoked }
            guard certStatus == V_OCSP_CERTSTATUS_GOOD else { return .refused("certificate status unknown to the responder") }
            guard let thisUpdate, OCSP_check_validity(thisUpdate, nextUpdate, 300, -1) == 1 else {
                return .refused("outside its validity (thisUpdate/nextUpdate)")
            }
            let next = nextUpdate.flatMap { Self.epochSeconds(UnsafePointer($0), now: now) }
            // The leeway above is for a responder's clock ahead of ours (thisUpdate); past
            // nextUpdate it would staple what clients must refuse.
            if let next, next <= now { return .refused("expired (its nextUpdate has passed)") }
            return .stapled(thisUpdate: Self.epochSeconds(UnsafePointer(thisUpdate), now: now), nextUpdate: next)
        }
        switch verdict {
        case .stapled(_, let next):
            response.withLock { $0 = Stapled(der: der, nextUpdate: next) }
        case .revoked:
            response.withLock { $0 = nil }
        case .refused:
            expire(now: now)
        }
        return verdict
    }

    /// Drops a stapled response past its `nextUpdate`: an expired staple fails strict clients.
    public func expire(now: Int64) {
        response.withLock { r in if let next = r?.nextUpdate, next <= now { r = nil } }
    }

    /// Carries a response over from the same certificate's staple of an earlier generation.
    func adopt(_ other: OCSPStaple) {
        guard other.certificateDER == certificateDER, !certificateDER.isEmpty,
              let copied = other.response.withLock({ $0 }) else { return }
        response.withLock { $0 = copied }
    }

    /// `time` as seconds since the epoch.
    private static func epochSeconds(_ time: UnsafePointer<ASN1_TIME>, now: Int64) -> Int64? {
        var days: Int32 = 0, seconds: Int32 = 0
        // From now to `time` (ASN1_TIME_diff with a NULL "from" means the current time).
        guard ASN1_TIME_diff(&days, &seconds, nil, time) == 1 else { return nil }
        return now + Int64(days) * 86_400 + Int64(seconds)
    }

    /// Installs the status callback on `ctx`; `self` must outlive `ctx` (the generation owns both).
    func install(on ctx: OpaquePointer) {
        _ = COpenSSL_SSL_CTX_set_status_callback(ctx, { ssl, arg in
            guard let ssl, let arg else { return SSL_TLSEXT_ERR_NOACK }
            return Unmanaged<OCSPStaple>.fromOpaque(arg).takeUnretainedValue().staple(ssl)
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// A client asked for the certificate's status (status_request): the stapled response, if any.
    /// `nextUpdate` is wall-clock time, so this reads the wall clock: time(2) goes through the
    /// vDSO, no system call, and only handshakes that ask for a status get here.
    private func staple(_ ssl: OpaquePointer) -> Int32 {
        guard COpenSSL_SSL_status_type(ssl) == TLSEXT_STATUSTYPE_ocsp,
              let der = stapledResponse(at: Int64(time(nil))),
              let copy = CRYPTO_malloc(der.count, nil, 0) else { return SSL_TLSEXT_ERR_NOACK }
        der.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: der.count) }
        guard COpenSSL_SSL_set_ocsp_response(ssl, copy.assumingMemoryBound(to: UInt8.self), der.count) == 1 else {
            CRYPTO_free(copy, nil, 0)
            TLSErrorQueue.clear()
            return SSL_TLSEXT_ERR_NOACK
        }
        return SSL_TLSEXT_ERR_OK
    }
}
