import CCurl

/// libcurl's process-wide initialisation, done once before the first handle is made.
/// (`curl_easy_init` would do it implicitly, but not thread-safely on every build.)
enum CurlGlobal {
    static let initialized: Bool = curl_global_init(CCurl_GLOBAL_DEFAULT) == CURLE_OK
}

/// The single Swift owner of one curl easy handle (one outbound request, reused for its retry).
/// Lives on one loop's thread; must be removed from its multi handle before it is closed.
final class CurlEasy {
    private(set) var handle: UnsafeMutableRawPointer?

    init() throws(OutboundError) {
        guard CurlGlobal.initialized else { throw OutboundError(.internalError, "curl_global_init failed") }
        guard let handle = curl_easy_init() else { throw OutboundError(.internalError, "curl_easy_init failed") }
        self.handle = handle
    }

    deinit { close() }

    func close() {
        guard let handle else { return }
        self.handle = nil
        curl_easy_cleanup(handle)
    }

    // The setters throw on a failed option: a silently ignored security option (peer
    // verification, protocol limits) must never let a request go out.

    func set(_ option: CURLoption, _ value: Int, _ name: StaticString) throws(OutboundError) {
        try check(CCurl_easy_setopt_long(live(), option, value), name)
    }

    func set(_ option: CURLoption, offset value: Int, _ name: StaticString) throws(OutboundError) {
        try check(CCurl_easy_setopt_off_t(live(), option, curl_off_t(value)), name)
    }

    /// libcurl copies string options, so the temporary C string Swift passes is enough.
    func set(_ option: CURLoption, _ value: String?, _ name: StaticString) throws(OutboundError) {
        try check(CCurl_easy_setopt_string(live(), option, value), name)
    }

    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?, _ name: StaticString) throws(OutboundError) {
        try check(CCurl_easy_setopt_pointer(live(), option, value), name)
    }

    func set(_ option: CURLoption, list: CurlHeaderList, _ name: StaticString) throws(OutboundError) {
        try check(CCurl_easy_setopt_slist(live(), option, list.head), name)
    }

    func set(_ option: CURLoption, callback: curl_write_callback, _ name: StaticString) throws(OutboundError) {
        try check(CCurl_easy_setopt_callback_write(live(), option, callback), name)
    }

    /// `COPYPOSTFIELDS` with an explicit size first, so bodies containing NUL bytes go out whole.
    func setBody(_ body: [UInt8]) throws(OutboundError) {
        try set(CURLOPT_POSTFIELDSIZE_LARGE, offset: body.count, "CURLOPT_POSTFIELDSIZE_LARGE")
        let handle = try live()
        let rc = body.withUnsafeBytes { raw -> CURLcode in
            // Never NULL, even for an empty body: NULL would mean "read the body from a callback".
            var empty: UInt8 = 0
            if let base = raw.baseAddress {
                return CCurl_easy_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: base))
            }
            return CCurl_easy_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, &empty)
        }
        try check(rc, "CURLOPT_COPYPOSTFIELDS")
    }

    func info(_ info: CURLINFO) -> Int {
        guard let handle else { return 0 }
        var value = 0
        return CCurl_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : 0
    }

    private func live() throws(OutboundError) -> UnsafeMutableRawPointer {
        guard let handle else { throw OutboundError(.internalError, "curl easy handle used after close") }
        return handle
    }

    private func check(_ rc: CURLcode, _ name: StaticString) throws(OutboundError) {
        guard rc == CURLE_OK else {
            throw OutboundError(.internalError, "curl_easy_setopt(\(name)) failed: \(CurlEasy.describe(rc))")
        }
    }

    static func describe(_ code: CURLcode) -> String {
        guard let text = curl_easy_strerror(code) else { return "curl error \(code.rawValue)" }
        return String(cString: text)
    }
}

/// The single Swift owner of one `curl_slist` (request header lines). libcurl copies each
/// line on append, but reads the list itself until the transfer ends: keep the owner alive
/// as long as the easy handle that uses it.
final class CurlHeaderList {
    private(set) var head: UnsafeMutablePointer<curl_slist>?

    init() {}

    deinit { close() }

    func append(_ line: String) throws(OutboundError) {
        guard let next = curl_slist_append(head, line) else {
            throw OutboundError(.internalError, "curl_slist_append failed")
        }
        head = next
    }

    func close() {
        guard let head else { return }
        self.head = nil
        curl_slist_free_all(head)
    }
}
