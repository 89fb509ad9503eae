import OAuthCallback
import ProxyConfiguration
import ProxyCore

/// Builds the TLS pieces from the configuration: the public listeners' certificates
/// (reloadable on SIGHUP), the client side of an `https://` upstream and of a `rediss://`
/// store. Every certificate and key file is read here, once.
struct TLSWiring {
    let credentials: TLSCredentials?
    let upstream: UpstreamTLSClient?
    /// Per upstream group (`config.proxy.groupSettings`' order), per server, nil for plain ones.
    let upstreamPerGroup: [[UpstreamTLSClient?]]
    /// For a `rediss://` store (`store_tls_*`).
    let store: UpstreamTLSClient?

    /// `previous`: the running generation's certificates, when this one is a reload's.
    init(_ config: AppConfig, previous: TLSCredentials? = nil) throws(ConfigProblems) {
        var problems: [ConfigProblem] = []
        var credentials: TLSCredentials? = nil
        if let tls = config.tls {
            do { credentials = try TLSCredentials(tls, keeping: previous) } catch {
                let path = error.file.map { tls.sessionTicketKeyFiles.contains($0) } == true ? "tls.session_ticket_keys" : "tls"
                problems.append(ConfigProblem(path: path, line: nil, message: error.description))
            }
        }
        // One client per https:// server: each verifies its own server's name (the same trust
        // and client certificate, `upstream_tls`).
        var perGroup: [[UpstreamTLSClient?]] = []
        groups: for group in config.proxy.groupSettings {
            var perServer: [UpstreamTLSClient?] = []
            for server in group.servers {
                guard server.target.tls else { perServer.append(nil); continue }
                do { perServer.append(try UpstreamTLSClient(config.upstreamTLS, host: server.target.host)) } catch {
                    problems.append(ConfigProblem(path: "upstream_tls", line: nil, message: error.description))
                    break groups
                }
            }
            perGroup.append(perServer)
        }
        let upstream = perGroup.lazy.flatMap { $0 }.compactMap { $0 }.first
        var store: UpstreamTLSClient? = nil
        if let redis = config.store.redis {
            do { store = try RedisStore.tlsClient(for: redis) } catch {
                problems.append(ConfigProblem(path: Self.storeKey(for: error, redis.tls), line: nil, message: error.description))
            }
        }
        // libcurl reads it only at the first IdP call, and then says `curl 77`: read it now.
        if let caFile = config.oauth.caFile, let problem = CertificateFile.problem(caFile) {
            problems.append(ConfigProblem(path: "oauth.ca_file", line: nil,
                                          message: problem.description + " (the CA the IdPs' certificates are verified against)"))
        }
        if !problems.isEmpty { throw ConfigProblems(problems) }
        self.credentials = credentials
        self.upstream = upstream
        upstreamPerGroup = perGroup
        self.store = store
    }

    /// The `store_tls_*` key whose file a set-up error names (`store` when it names none).
    private static func storeKey(for error: TLSSetupError, _ settings: UpstreamTLSSettings) -> String {
        switch error.file {
        case nil: "store"
        case settings.caFile: "store_tls_ca"
        case settings.clientKeyFile: "store_tls_client_key"
        default: "store_tls_client_cert"
        }
    }

    /// What the file and flags must agree on, before any file is read.
    static func check(_ config: AppConfig) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        if let tls = config.tls {
            if tls.certFile.isEmpty || tls.keyFile.isEmpty {
                problems.append(ConfigProblem(path: "tls", line: nil,
                    message: "needs both a certificate and a key (tls.cert and tls.key, or --tls-cert and --tls-key)"))
            }
            if config.listen.contains(where: { !$0.isIP }) {
                problems.append(ConfigProblem(path: "listen", line: nil, message: "TLS listeners must be HOST:PORT addresses, not unix sockets"))
            }
        }
        if let redirect = config.redirectHTTP {
            if config.tls == nil {
                problems.append(ConfigProblem(path: "redirect_http", line: nil,
                    message: "redirects to HTTPS, so it needs TLS on the public listener (tls, or --tls-cert and --tls-key)"))
            }
            if config.listen.contains(redirect) || config.internalListen == redirect {
                problems.append(ConfigProblem(path: "redirect_http", line: nil, message: "\(redirect) is already used by another listener"))
            }
        }
        // QUIC is bound beside each TLS listener, with its certificate: without TLS there is none.
        if config.proxy.http3.enabled && config.tls == nil {
            problems.append(ConfigProblem(path: "http3.enabled", line: nil,
                message: "serves HTTP/3 beside the TLS listeners, so it needs TLS on the public listener (tls.cert and tls.key, or --tls-cert and --tls-key)"))
        }
        if config.upstream?.tls != true && !config.upstreamTLS.isDefault {
            problems.append(ConfigProblem(path: "upstream_tls", line: nil,
                message: "applies to https:// upstreams only (the upstream is not https://)"))
        }
        if (config.upstreamTLS.clientCertFile == nil) != (config.upstreamTLS.clientKeyFile == nil) {
            problems.append(ConfigProblem(path: "upstream_tls", line: nil,
                message: "a client certificate needs both its certificate and its key (client_cert and client_key)"))
        }
        return problems
    }

    /// The port clients are redirected to: the first public listener's.
    static func httpsPort(_ config: AppConfig) -> UInt16 {
        config.listen.first?.port ?? 443
    }
}
