import CCurl

/// How libcurl's result codes map onto `OutboundError` kinds, and which are worth a retry.
enum CurlErrors {
    static func kind(of code: CURLcode) -> OutboundError.Kind {
        switch code {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .connect
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_CRL_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            return .certificate
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM,
             CURLE_SSL_CIPHER, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_SHUTDOWN_FAILED,
             CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            return .tls
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        case CURLE_OUT_OF_MEMORY, CURLE_FAILED_INIT, CURLE_BAD_FUNCTION_ARGUMENT,
             CURLE_UNKNOWN_OPTION, CURLE_NOT_BUILT_IN, CURLE_ABORTED_BY_CALLBACK:
            return .internalError
        case CURLE_FILESIZE_EXCEEDED:
            // CURLOPT_MAXFILESIZE saw a Content-Length over the cap; the callbacks catch the rest.
            return .protocolError
        default:
            return .protocolError
        }
    }

    /// Failures of the transport before any answer, where a new connection may well succeed
    /// (a kept-alive connection the peer had just closed, a reset during the handshake).
    /// Certificate problems, timeouts and malformed answers are not: trying again would give
    /// the same result, or spend time the caller no longer has.
    static func isTransient(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_SSL_CONNECT_ERROR,
             CURLE_HTTP2, CURLE_HTTP2_STREAM:
            return true
        default:
            return false
        }
    }

    /// libcurl's messages name the host and port, not the URL; should one ever quote the URL,
    /// its query (codes, tokens) is cut out before the text reaches a log.
    static func redactingQuery(of url: String, in text: String) -> String {
        guard let q = url.firstIndex(of: "?") else { return text }
        var query = url[url.index(after: q)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        guard !query.isEmpty, text.contains(query) else { return text }
        return text.replacing(query, with: "[query]")
    }
}
