import OAuthCallback
import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// Turns a configuration file into an `AppConfig`, reporting *every* problem with its key path.
///
/// Every key is listed here with its type; defaults live on the structs (`AppConfig`,
/// `ProxyConfig`, `Timeouts`, `OAuthSettings`). Secrets are never accepted inline: they come
/// from `…_env` (an environment variable) or `…_file` (read once, here).
public struct ConfigLoader {
    public var environment: [String: String]
    public var readFile: (String) -> String?

    public init(environment: [String: String] = ConfigLoader.processEnvironment(),
                readFile: @escaping (String) -> String? = ConfigLoader.readTextFile) {
        self.environment = environment
        self.readFile = readFile
    }

    /// The file at `path` with the environment's overrides; with no file, the embedded
    /// defaults with the environment's overrides.
    public func load(path: String?) -> Result<AppConfig, ConfigProblems> {
        guard let path else { return load(text: "") }
        guard let text = readFile(path) else {
            return .failure(ConfigProblems([ConfigProblem(path: "", line: nil, message: "cannot read '\(path)'")]))
        }
        return load(text: text)
    }

    public func load(text: String) -> Result<AppConfig, ConfigProblems> {
        read(text: text).result
    }

    /// The result, and every key pattern the loader asked for (for the test that holds
    /// `ConfigLoader.keys` to the loader).
    func read(text: String) -> (result: Result<AppConfig, ConfigProblems>, keysRead: Set<String>) {
        let parsed: ConfigNode
        do {
            parsed = try YAMLReader.read(text)
        } catch {
            return (.failure(ConfigProblems([ConfigProblem(path: "", line: error.line, message: error.message)])), [])
        }
        let problems = ProblemList()
        let root = applyEnvironment(to: parsed, problems: problems)
        var config = AppConfig()
        let top = MappingReader(root, path: "", problems: problems)
        readEngine(top, into: &config)
        if let oauth = top.mapping("oauth") { readOAuth(oauth, into: &config.oauth) }
        if let providers = top.mapping("providers", keysAre: "<name>") { readProviders(providers, into: &config.oauth) }
        defaultApplePaths(&config.oauth)
        if config.oauth.providers.values.contains(where: { $0.handoff == .session }) && config.oauth.session == nil {
            problems.add("oauth.session", nil, "is required when a provider uses handoff session (at least secret_env or secret_file)")
        }
        if let session = config.oauth.session, session.access.isEmpty,
           config.oauth.providers.values.contains(where: { $0.handoff == .session }) {
            problems.add("oauth.session", nil,
                         "session mode needs a rule for who may enter: allowed_email_domains, allowed_emails, allowed_emails_file, allowed_groups, allowed_hosted_domains or allowed_claims — or allow_any_authenticated_user: true to let in every account the providers accept (with kind: google, every Google account)")
        }
        if let session = config.oauth.session {
            let identity = Set(session.headers.all.map { $0.lowercased() })
            let rules = config.proxy.headerRules
            for name in (rules.request.set + rules.request.add).map(\.name) + rules.request.remove
            where identity.contains(name.lowercased()) {
                problems.add("headers.request", nil, "'\(name)' is an identity header session mode sets (oauth.session.headers): a rule cannot change it")
            }
        }
        if let session = config.oauth.session, session.idleTimeoutSeconds != nil,
           !(session.serverSide ?? (config.store.redis != nil)) {
            problems.add("oauth.session.idle_timeout", nil,
                         "needs server-side sessions (server_side: true, or a redis store): a session sealed in its cookie cannot slide without a Set-Cookie on every response")
        }
        if let session = config.oauth.session, let interval = session.refreshIntervalSeconds {
            // The refresh token is a long-lived credential for the user's account at the IdP:
            // it is kept in the store only, never sealed into a cookie a browser carries around.
            if !(session.serverSide ?? (config.store.redis != nil)) {
                problems.add("oauth.session.refresh_interval", nil,
                             "needs server-side sessions (server_side: true, or a redis store): refresh tokens are kept in the store only, never in a cookie")
            }
            if interval >= session.lifetimeSeconds {
                problems.add("oauth.session.refresh_interval", nil,
                             "must be shorter than oauth.session.lifetime (\(session.lifetimeSeconds)s), or no session would ever be refreshed: shorten it, or remove it")
            }
        }
        if let domain = config.oauth.session?.cookieDomain {
            // The names the listener serves certificates for are the hosts users sign in on.
            for name in (config.tls?.sni ?? []).flatMap(\.names) {
                let host = name.hasPrefix("*.") ? String(name.dropFirst(2)) : name
                if !SessionSettings.isHost(host, under: domain) {
                    problems.add("oauth.session.cookie_domain", nil,
                                 "'\(domain)' does not cover tls.sni name '\(name)': a sign-in there could never keep its session")
                }
            }
        }
        for name in config.oauth.session?.bearerProviders ?? [] {
            guard let p = config.oauth.providers[name] else {
                problems.add("oauth.session.bearer_tokens", nil, "'\(name)' is not a configured provider")
                continue
            }
            if p.kind == .facebook {
                problems.add("oauth.session.bearer_tokens", nil, "'\(name)' is kind facebook, which issues no id_token to verify")
            } else if p.native.isEmpty {
                problems.add("oauth.session.bearer_tokens", nil, "'\(name)' has no native clients: bearer tokens must be issued to one (providers.\(name).native)")
            }
        }
        for (name, p) in config.oauth.providers where p.handoff == .session {
            if p.appClient == nil {
                problems.add("providers.\(name).app_client", nil, "is required for handoff session (/_oauth/start sends the app's web client)")
            }
            // A plain browser signs in through /_oauth/web_callback, which exchanges the code
            // with the web client and verifies the id_token like the native path. Facebook's
            // web dialog issues no id_token for the scopes /_oauth/start asks, and Apple's web
            // flow posts its answer (response_mode=form_post) — neither fits that path, and a
            // session mode whose browsers dead-end at sign-in is worse than a clear refusal.
            if p.kind == .facebook || p.kind == .apple {
                problems.add("providers.\(name).handoff", nil,
                             "session is not available for kind \(p.kind.rawValue): its web sign-in (/_oauth/web_callback) is supported for google and oidc only; use relay or params")
            }
            if p.kind == .oidc && p.endpoints.authorization == nil {
                problems.add("providers.\(name).endpoints.authorization", nil, "is required for an oidc provider in handoff session")
            }
        }
        reportAmbiguousAppClients(config.oauth, problems)
        top.finish()
        reportUnknownVariables(problems)
        let result: Result<AppConfig, ConfigProblems> = problems.items.isEmpty ? .success(config) : .failure(ConfigProblems(problems.items))
        return (result, problems.keysRead)
    }

    /// An ordinary code reaching the relay token endpoint goes to the token endpoint of the
    /// provider whose app client sent it; two providers with one app client id and different
    /// token endpoints leave that choice open. (Relay codes name their provider and are not
    /// affected; identical endpoints are fine.)
    private func reportAmbiguousAppClients(_ o: OAuthSettings, _ problems: ProblemList) {
        var seen: Set<String> = []
        for p in o.providers.values.sorted(by: { $0.name < $1.name }) {
            guard let id = p.appClient?.clientID, seen.insert(id).inserted else { continue }
            let sharing = o.providersSharing(appClientID: id)
            guard let first = sharing.first, sharing.contains(where: { $0.tokenEndpointSource != first.tokenEndpointSource }) else { continue }
            for other in sharing.dropFirst() where other.tokenEndpointSource != first.tokenEndpointSource {
                problems.add("providers.\(other.name).app_client.id", nil,
                             "is also providers.\(first.name).app_client.id, whose token endpoint differs (\(other.tokenEndpointSource) vs \(first.tokenEndpointSource)): the relay token endpoint could not tell which provider an ordinary code belongs to; give each provider its own app client")
            }
        }
    }

    // MARK: Engine

    private func readEngine(_ m: MappingReader, into c: inout AppConfig) {
        if let list = m.strings("listen") {
            var out: [SocketAddress] = []
            for text in list {
                if let a = SocketAddress.parse(text) { out.append(a) } else {
                    m.problems.add(m.child("listen"), m.node("listen")?.line, "'\(text)' is not HOST:PORT, [V6]:PORT or unix:/path")
                }
            }
            if !out.isEmpty { c.listen = out }
        }
        if let v = m.string("internal_listen") {
            if v == "off" { c.internalListen = nil } else if let a = SocketAddress.parse(v) { c.internalListen = a } else {
                m.problems.add(m.child("internal_listen"), m.node("internal_listen")?.line, "'\(v)' is not HOST:PORT or off")
            }
        }
        if let u = m.parsed("upstream", "http://HOST:PORT, https://HOST:PORT or unix:/path", UpstreamTarget.parse) { c.upstream = u }
        if let list = m.node("upstreams") { readUpstreams(list, m, into: &c) }
        if let h = m.mapping("upstream_health") { readUpstreamHealth(h, into: &c.proxy.upstreamHealth) }
        readBalancing(m, into: &c)
        if let v = m.parsed("upstream_resolve_interval", "a duration like 10s or 1m, or 0 (only at start and on reload)",
                            { $0 == "0" ? 0 : Units.duration($0) }) {
            c.upstreamResolveInterval = v
        }
        if let t = m.mapping("tls") { c.tls = readTLS(t) }
        if let v = m.string("redirect_http") {
            if let a = SocketAddress.parse(v), a.isIP { c.redirectHTTP = a } else {
                m.problems.add(m.child("redirect_http"), m.node("redirect_http")?.line, "'\(v)' is not HOST:PORT or [V6]:PORT")
            }
        }
        if let u = m.mapping("upstream_tls") { readUpstreamTLS(u, into: &c.upstreamTLS) }
        if let n = m.int("loops", in: 1...256) { c.loops = n }
        readStore(m, into: &c)
        if let a = m.string("access_log") { c.accessLog = a }
        if let log = m.mapping("log") {
            if let l = log.parsed("level", "debug, info, warn or error", Logger.Level.init(name:)) { c.logLevel = l }
            if let f = log.parsed("format", "json or text", { ["json": Logger.Format.json, "text": .text][$0] }) { c.logFormat = f }
            log.finish()
        }
        if let limits = m.mapping("limits") {
            if let n = limits.parsed("max_body_size", "a size like 100m (0 = no limit)", Units.size) { c.proxy.maxBodySize = n }
            if let n = limits.parsed("max_header_size", "a size from 1k to 1m", { Units.size($0).flatMap { (1024...(1 << 20)).contains($0) ? Int($0) : nil } }) {
                c.proxy.limits.maxHeadBytes = n
            }
            if let n = limits.parsed("max_connections", "a number of connections from 16 to 10000000", {
                Int($0).flatMap { (16...10_000_000).contains($0) ? $0 : nil }
            }) {
                c.maxConnections = n
            }
            if let n = limits.parsed("upstream_idle_connections", "a number of connections from 0 (no cap) to 10000000", {
                Int($0).flatMap { (0...10_000_000).contains($0) ? $0 : nil }
            }) {
                c.proxy.upstreamIdleConnections = n
            }
            readClientLimits(limits, into: &c.proxy.clientLimits)
            limits.finish()
        }
        if let t = m.mapping("timeouts") {
            let d = "a duration like 500ms, 10s or 2m"
            if let v = t.parsed("client_header", d, Units.duration) { c.proxy.timeouts.clientHeader = v }
            if let v = t.parsed("client_body", d, Units.duration) { c.proxy.timeouts.clientBody = v }
            if let v = t.parsed("client_send", d, Units.duration) { c.proxy.timeouts.clientSend = v }
            if let v = t.parsed("keepalive", d, Units.duration) { c.proxy.timeouts.keepAlive = v }
            if let v = t.parsed("upstream_connect", d, Units.duration) { c.proxy.timeouts.upstreamConnect = v }
            if let v = t.parsed("upstream", d, Units.duration) { c.proxy.timeouts.upstreamResponse = v }
            if let v = t.parsed("upstream_idle", d, Units.duration) { c.proxy.timeouts.upstreamIdle = v }
            if let v = t.parsed("drain", d, Units.duration) { c.proxy.timeouts.drain = v }
            if let v = t.parsed("tls_handshake", d, Units.duration) { c.proxy.timeouts.tlsHandshake = v }
            t.finish()
        }
        if let list = m.cidrs("trusted_proxies") { c.proxy.trustedProxies += list }
        if let b = m.bool("proxy_protocol") { c.proxy.proxyProtocol = b }
        if let b = m.bool("allow_underscores_in_headers") { c.proxy.allowUnderscoresInHeaders = b }
        if let h = m.mapping("http2") { readHTTP2(h, into: &c.proxy.http2) }
        if let h = m.mapping("http3") { readHTTP3(h, into: &c.proxy.http3) }
        if let z = m.mapping("compression") { readCompression(z, into: &c.proxy.compression) }
        if let b = m.mapping("buffering") { readBuffering(b, into: &c.proxy.buffering) }
        if let s = m.mapping("splice") { readSplice(s, into: &c.proxy.splice) }
        if let s = m.mapping("maintenance") { readMaintenance(s, into: &c.proxy.maintenance) }
        if let s = m.mapping("static") { readStatic(s, into: &c.proxy.staticFiles) }
        if let r = m.node("x_accel_redirect") { readAccelRedirect(r, m, into: &c.proxy.accelRedirect) }
        if let e = m.mapping("error_pages", keysAre: "<status>") { readErrorPages(e, into: &c.proxy.errorPages) }
        if let h = m.mapping("headers") { readHeaderRules(h, into: &c.proxy.headerRules) }
        if let r = m.node("rate_limits") { readRateLimits(r, m, into: &c.proxy.clientLimits) }
        if let r = m.node("client_access") { readClientAccess(r, m, into: &c.proxy.clientAccess) }
    }

    /// `headers: { request | response: { set: {NAME: VALUE}, add: {NAME: VALUE}, remove: [NAME] } }`.
    /// Names the proxy owns are refused here; the identity names session mode uses, once the
    /// session settings are read (`checkHeaderRules`).
    private func readHeaderRules(_ m: MappingReader, into rules: inout HeaderRules) {
        for (key, towardsUpstream) in [("request", true), ("response", false)] {
            guard let d = m.mapping(key) else { continue }
            var direction = HeaderRules.Direction()
            func usable(_ name: String, _ path: String, _ line: Int?) -> Bool {
                if !HeaderRules.isName(name) {
                    d.problems.add(path, line, "'\(name)' is not a header field name")
                    return false
                }
                if HeaderRules.isProtected(name, request: towardsUpstream) || IdentityHeaders.isIdentityHeader(name) {
                    d.problems.add(path, line, "'\(name)' is set by the proxy itself (forwarding, identity or framing) and cannot be changed by a rule")
                    return false
                }
                return true
            }
            for verb in ["set", "add"] {
                guard let fields = d.mapping(verb, keysAre: "<name>") else { continue }
                for name in fields.keys {
                    guard let value = fields.string(name) else { continue }
                    guard usable(name, fields.child(name), fields.node(name)?.line) else { continue }
                    guard HeaderRules.isValue(value) else {
                        fields.problems.add(fields.child(name), fields.node(name)?.line, "the value has a line break or a control character")
                        continue
                    }
                    if let unknown = HeaderRules.unknownVariable(in: value) {
                        fields.problems.add(fields.child(name), fields.node(name)?.line,
                                            "names {\(unknown)}, which is no variable (there are {request_id} and {client_address})")
                        continue
                    }
                    let field = HeaderRules.Field(name: name, value: value)
                    if verb == "set" { direction.set.append(field) } else { direction.add.append(field) }
                }
                fields.finish()
            }
            if let names = d.strings("remove") {
                direction.remove = names.filter { usable($0, d.child("remove"), d.node("remove")?.line) }
            }
            d.finish()
            if towardsUpstream { rules.request = direction } else { rules.response = direction }
        }
        m.finish()
    }

    /// `error_pages: { "502": FILE, "5xx": FILE, "4xx": FILE }`: HTML files read now (and on
    /// every reload), at most 64 KiB each.
    private func readErrorPages(_ m: MappingReader, into e: inout ErrorPageSettings) {
        for key in m.keys {
            guard ErrorPageSettings.isKey(key) else {
                m.problems.add(m.child(key), m.line, "is not a status from 400 to 599, 4xx or 5xx")
                _ = m.node(key)
                continue
            }
            guard let path = m.string(key) else { continue }
            guard let text = readFile(path) else {
                m.problems.add(m.child(key), m.node(key)?.line, "cannot read '\(path)'")
                continue
            }
            guard text.utf8.count <= 64 * 1024 else {
                m.problems.add(m.child(key), m.node(key)?.line, "'\(path)' is larger than 64 KiB: an error page should be small")
                continue
            }
            e.templates[key] = text
        }
        m.finish()
    }

    /// `compression: { enabled, codings, gzip_level, brotli_quality, min_length, types,
    /// exclude_paths, max_memory }`: the section turns compression on (`enabled: false` keeps it off).
    private func readCompression(_ m: MappingReader, into z: inout CompressionSettings) {
        z.codings = [.brotli, .gzip]
        if let list = m.strings("codings") {
            var codings: [ContentCoding] = []
            for text in list {
                guard let coding = ContentCoding(rawValue: text.lowercased()) else {
                    m.problems.add(m.child("codings"), m.node("codings")?.line, "'\(text)' is not a coding the proxy applies (br, gzip)")
                    continue
                }
                if !codings.contains(coding) { codings.append(coding) }
            }
            z.codings = codings
        }
        if m.bool("enabled") == false { z.codings = [] }
        if let n = m.int("gzip_level", in: 1...9) { z.gzipLevel = Int32(n) }
        if let n = m.int("brotli_quality", in: 0...11) { z.brotliQuality = UInt32(n) }
        if let n = m.parsed("min_length", "a size like 512 or 1k", Units.size) { z.minLength = n }
        if let list = m.strings("types") {
            var types: [String] = []
            for text in list {
                let t = text.lowercased()
                let parts = t.split(separator: "/", omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, parts[0] != "*",
                      !t.contains(";"), !t.contains(" ") else {
                    m.problems.add(m.child("types"), m.node("types")?.line, "'\(text)' is not a media type like text/html or text/*")
                    continue
                }
                types.append(t)
            }
            z.types = types
        }
        if let n = m.parsed("max_memory", "a size from 1m to 64g, like 256m", {
            Units.size($0).flatMap { (1 << 20...64 << 30).contains($0) ? Int($0) : nil }
        }) {
            z.maxMemory = n
        }
        if let list = m.pathPrefixes("exclude_paths") { z.excludePaths += list }
        m.finish()
    }

    /// `buffering: { responses, requests, max_memory }`.
    private func readBuffering(_ m: MappingReader, into b: inout BufferingSettings) {
        let size = "a size from 0 (off) to 1g, like 8m"
        if let n = m.parsed("responses", size, { Units.size($0).flatMap { $0 <= 1 << 30 ? Int($0) : nil } }) { b.responses = n }
        if let n = m.parsed("requests", size, { Units.size($0).flatMap { $0 <= 1 << 30 ? Int($0) : nil } }) { b.requests = n }
        if let n = m.parsed("max_memory", "a size from 1m to 64g, like 256m", {
            Units.size($0).flatMap { (1 << 20...64 << 30).contains($0) ? Int($0) : nil }
        }) {
            b.maxMemory = n
        }
        for (key, value) in [("responses", b.responses), ("requests", b.requests)] where value > b.maxMemory {
            m.problems.add(m.child(key), m.node(key)?.line,
                           "is more than buffering.max_memory (\(b.maxMemory) bytes): not one body could be read ahead")
        }
        m.finish()
    }

    /// `splice: { enabled, min_size, max_pipes }`.
    /// `maintenance: { file, allow_paths, allow_clients, retry_after }`.
    private func readMaintenance(_ m: MappingReader, into s: inout MaintenanceSettings) {
        if let path = m.string("file") {
            if path.hasPrefix("/") { s.file = path } else {
                m.problems.add(m.child("file"), m.node("file")?.line, "'\(path)' must be an absolute path")
            }
        } else if m.node("file") == nil {
            m.problems.add(m.child("file"), nil, "is required: the file whose presence turns the page on")
        }
        if let list = m.pathPrefixes("allow_paths") { s.allowPaths = list }
        if let list = m.cidrs("allow_clients") { s.allowClients = list }
        if let n = m.parsed("retry_after", "a duration from 1s to 1d, like 60s", {
            Units.duration($0).flatMap { $0 >= Timeouts.second && $0 <= 86_400 * Timeouts.second ? $0 : nil }
        }) {
            s.retryAfterSeconds = Int(n / Timeouts.second)
        }
        m.finish()
    }

    private func readSplice(_ m: MappingReader, into s: inout SpliceSettings) {
        if let b = m.bool("enabled") { s.enabled = b }
        if let n = m.parsed("min_size", "a size from 4k to 1g, like 64k", {
            Units.size($0).flatMap { (4 << 10...1 << 30).contains($0) ? $0 : nil }
        }) {
            s.minSize = n
        }
        if let n = m.int("max_pipes", in: 1...65_536) { s.maxPipes = n }
        m.finish()
    }

    /// `static: { root, immutable_paths, precompressed, symlinks_outside_root }`: the root must
    /// be a directory now (and on every reload).
    private func readStatic(_ m: MappingReader, into s: inout StaticSettings) {
        if let root = m.string("root", required: true) {
            if let problem = StaticSettings.problem(root: root) {
                m.problems.add(m.child("root"), m.node("root")?.line, problem)
            } else {
                s.root = root
            }
        }
        if let list = m.pathPrefixes("immutable_paths") { s.immutablePaths = list }
        if let b = m.bool("precompressed") { s.precompressed = b }
        if let b = m.bool("symlinks_outside_root") { s.symlinksOutsideRoot = b }
        m.finish()
    }

    /// `http2: { cleartext, max_concurrent_streams, stream_window, connection_window,
    /// max_resets_per_second, reset_burst, glitch_burst, max_glitches_per_second }` (whether TLS
    /// offers h2 at all is `tls.http2`).
    private func readHTTP2(_ m: MappingReader, into h: inout HTTP2Settings) {
        if let b = m.bool("cleartext") { h.cleartext = b }
        if let n = m.int("max_concurrent_streams", in: 1...10_000) { h.maxConcurrentStreams = UInt32(n) }
        // RFC 9113 §6.9.2: a window is at most 2^31-1; below 16 KiB one frame would not fit.
        let window = "a size from 16k to 16m, like 256k"
        if let v = m.parsed("stream_window", window, { Units.size($0).flatMap { (16_384...16_777_216 as ClosedRange<UInt64>).contains($0) ? $0 : nil } }) {
            h.streamWindow = UInt32(v)
        }
        if let v = m.parsed("connection_window", window, { Units.size($0).flatMap { (16_384...16_777_216 as ClosedRange<UInt64>).contains($0) ? $0 : nil } }) {
            h.connectionWindow = UInt32(v)
        }
        if let n = m.int("max_resets_per_second", in: 1...100_000) { h.resetsPerSecond = UInt64(n) }
        if let n = m.int("reset_burst", in: 1...100_000) { h.resetBurst = UInt64(n) }
        if let n = m.int("glitch_burst", in: 10...1_000_000) { h.glitchBurst = n }
        if let n = m.int("max_glitches_per_second", in: 1...1_000_000) { h.glitchesPerSecond = n }
        m.finish()
    }

    // MARK: TLS

    /// `tls: { cert, key, min_version, sni: [{ names, cert, key }] }`. Only paths are read here:
    /// the files themselves are read once, when the listener is built.
    private func readTLS(_ m: MappingReader) -> TLSServerSettings? {
        let cert = m.string("cert", required: true)
        let key = m.string("key", required: true)
        let minVersion = m.parsed("min_version", "1.2 or 1.3", TLSVersion.init)
        let http2 = m.bool("http2")
        let ocspStapling = m.bool("ocsp_stapling")
        // Read (and checked: 80 bytes each, distinct names) with the certificates, by `TLSCredentials`.
        let ticketKeys = m.strings("session_ticket_keys") ?? []
        var hsts: HSTS? = nil
        if let h = m.mapping("hsts") {
            var v = HSTS()
            if let n = h.int("max_age", in: 0...Int(UInt32.max)) { v.maxAge = UInt64(n) }
            if let b = h.bool("include_subdomains") { v.includeSubdomains = b }
            if let b = h.bool("preload") { v.preload = b }
            if v.preload && (!v.includeSubdomains || v.maxAge < 31_536_000) {
                h.problems.add(h.child("preload"), h.node("preload")?.line,
                               "needs include_subdomains: true and max_age of at least 31536000 (one year): browsers' preload lists refuse less")
            }
            h.finish()
            hsts = v
        }
        var sni: [SNICertificate] = []
        if let node = m.node("sni") {
            if case .sequence(let items, _) = node {
                var seen: [String: String] = [:]
                for (i, item) in items.enumerated() {
                    let path = "\(m.child("sni"))[\(i)]"
                    let entry = MappingReader(item, path: path, pattern: m.childPattern("sni") + "[]", problems: m.problems)
                    let names = entry.strings("names") ?? []
                    if entry.node("names") == nil { m.problems.add("\(path).names", item.line, "is required (the server names this certificate serves)") }
                    var valid: [String] = []
                    for name in names {
                        let lower = name.lowercased()
                        if !SNICertificate.isValidPattern(name) {
                            m.problems.add("\(path).names", entry.node("names")?.line, "'\(name)' is not a DNS name or *.domain pattern")
                        } else if let other = seen[lower] {
                            m.problems.add("\(path).names", entry.node("names")?.line, "'\(name)' is already served by \(other)")
                        } else {
                            seen[lower] = path
                            valid.append(name)
                        }
                    }
                    let entryCert = entry.string("cert", required: true)
                    let entryKey = entry.string("key", required: true)
                    entry.finish()
                    if let entryCert, let entryKey, !valid.isEmpty {
                        sni.append(SNICertificate(names: valid, certFile: entryCert, keyFile: entryKey))
                    }
                }
            } else {
                m.problems.add(m.child("sni"), node.line, "must be a list of { names, cert, key }, not \(node.kindName)")
            }
        }
        m.finish()
        guard let cert, let key else { return nil }
        var settings = TLSServerSettings(certFile: cert, keyFile: key, minVersion: minVersion ?? .tls12, sni: sni, http2: http2 ?? true,
                                         sessionTicketKeyFiles: ticketKeys, hsts: hsts)
        settings.ocspStapling = ocspStapling ?? false
        return settings
    }

    /// `upstream_tls: { ca, client_cert, client_key, server_name }`.
    private func readUpstreamTLS(_ m: MappingReader, into u: inout UpstreamTLSSettings) {
        if let f = m.string("ca") {
            if readFile(f) == nil { m.problems.add(m.child("ca"), m.node("ca")?.line, "cannot read '\(f)'") } else { u.caFile = f }
        }
        let cert = m.string("client_cert")
        let key = m.string("client_key")
        if (cert == nil) != (key == nil) {
            m.problems.add(m.child(cert == nil ? "client_cert" : "client_key"), m.line, "client_cert and client_key go together")
        } else {
            u.clientCertFile = cert
            u.clientKeyFile = key
        }
        if let n = m.parsed("server_name", "a DNS name or an IP address", { UpstreamTLSSettings.isValidServerName($0) ? $0 : nil }) {
            u.serverName = n
        }
        m.finish()
    }

    // MARK: OAuth

    private func readOAuth(_ m: MappingReader, into o: inout OAuthSettings) {
        if let p = m.string("callback_path") {
            if p.hasPrefix("/") && !p.hasPrefix("//") && !p.contains("?") { o.callbackPath = p } else {
                m.problems.add(m.child("callback_path"), m.node("callback_path")?.line, "must be a path starting with a single /")
            }
        }
        // The store keeps entries for at most 30 days; a code is long dead after a few minutes.
        if let v = m.parsed("replay_window", "a duration from 1m to 30 days", {
            Units.duration($0).flatMap { $0 >= 60_000_000_000 && $0 <= 30 * 86_400_000_000_000 ? $0 : nil }
        }) {
            o.replayWindowSeconds = Int64(v / 1_000_000_000)
        }
        if let v = m.parsed("clock_leeway", "a duration of at most 5m", { Units.duration($0).flatMap { $0 <= 300_000_000_000 ? $0 : nil } }) {
            o.clockLeewaySeconds = Int64(v / 1_000_000_000)
        }
        if let f = m.string("ca_file") {
            if readFile(f) == nil { m.problems.add(m.child("ca_file"), m.node("ca_file")?.line, "cannot read '\(f)'") } else { o.caFile = f }
        }
        if let v = m.parsed("idp_timeout", "a duration like 10s", Units.duration) { o.idpTimeout = v }
        // Below 10 s the probes would be a load on the IdP of their own; 0 turns them off.
        if let v = m.parsed("provider_check_interval", "0 (off) or a duration from 10s to 24h", { text in
            text == "0" ? 0 : Units.duration(text).flatMap { $0 >= 10_000_000_000 && $0 <= 86_400_000_000_000 ? $0 : nil }
        }) {
            o.providerCheckInterval = v
        }
        if let v = m.parsed("rate_limit", "callbacks per client address, like 30/m, 5/s or 600/h", RateLimit.parse) {
            o.rateLimit = v
        }
        if let session = m.mapping("session") { o.session = readSession(session) }
        if let links = m.mapping("app_links") { o.appLinks = readAppLinks(links) }
        if let p = m.string("relay_token_path") {
            if p.hasPrefix("/") && !p.hasPrefix("//") && !p.contains("?") { o.relayTokenPath = p } else {
                m.problems.add(m.child("relay_token_path"), m.node("relay_token_path")?.line, "must be a path starting with a single /")
            }
        }
        if let v = m.parsed("relay_code_ttl", "a duration from 1s to 60s", {
            Units.duration($0).flatMap { $0 >= 1_000_000_000 && $0 <= 60_000_000_000 ? $0 : nil }
        }) {
            o.relayCodeTTLSeconds = Int64(v / 1_000_000_000)
        }
        m.finish()
    }

    /// Reads `<name>_env` or `<name>_file` (exactly one). An inline `<name>` is refused.
    func secret(_ m: MappingReader, _ name: String, required: Bool) -> Secret? {
        if let inline = m.node(name, isKey: false) {
            m.problems.add(m.child(name), inline.line,
                           "secrets are not accepted inline; use \(name)_env (a variable name) or \(name)_file (a path)")
            return nil
        }
        let env = m.string("\(name)_env")
        let file = m.string("\(name)_file")
        switch (env, file) {
        case (let e?, nil):
            m.problems.referencedVariables.insert(e)
            guard let v = environment[e], !v.isEmpty else {
                m.problems.add(m.child("\(name)_env"), m.node("\(name)_env")?.line, "environment variable \(e) is not set")
                return nil
            }
            return Secret(v)
        case (nil, let f?):
            guard var v = readFile(f) else {
                m.problems.add(m.child("\(name)_file"), m.node("\(name)_file")?.line, "cannot read '\(f)'")
                return nil
            }
            while v.hasSuffix("\n") || v.hasSuffix("\r") { v.removeLast() }
            guard !v.isEmpty else {
                m.problems.add(m.child("\(name)_file"), m.node("\(name)_file")?.line, "'\(f)' is empty")
                return nil
            }
            return Secret(v)
        case (_?, _?):
            m.problems.add(m.child(name), m.line, "give either \(name)_env or \(name)_file, not both")
            return nil
        case (nil, nil):
            if required { m.problems.add(m.child("\(name)_env"), m.line, "is required (or \(name)_file)") }
            return nil
        }
    }

    // MARK: Files and environment

    /// The Redis password's variable when the file names none (`store_password_env`).
    public static let redisPasswordVariable = "CALLBACK_PROXY_REDIS_PASSWORD"

    public static func processEnvironment() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { out[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return out
    }

    /// Reads a whole (small) text file; nil if it cannot be read or is larger than 1 MiB.
    public static func readTextFile(_ path: String) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n > 0 { bytes += chunk[0..<n] }
            if n < chunk.count { break }
            if bytes.count > 1 << 20 { return nil }
        }
        if ferror(f) != 0 { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}
