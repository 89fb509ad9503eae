import OAuthCallback
import ProxyConfiguration
import ProxyCore
#if canImport(Glibc)
import Glibc
#endif

/// Loading and validating the configuration: the same code serves `check` and start-up, so a
/// file that passes `check` starts.
enum Check {
    static func load(_ options: Options) -> Result<AppConfig, ConfigProblems> {
        // The file (or the defaults), then the CALLBACK_PROXY_… variables, then the flags.
        let base: AppConfig
        switch ConfigLoader().load(path: options.configPath) {
        case .success(let c): base = c
        case .failure(let p): return .failure(p)
        }
        let config = options.resolve(base)
        if config.upstream == nil {
            return .failure(ConfigProblems([ConfigProblem(path: "upstream", line: nil,
                message: "is required (in the file, or --upstream http://127.0.0.1:3000)")]))
        }
        if let path = config.oauth.session?.access.emailsFile {
            do { _ = try AllowedEmailsFile(path: path, now: 0) } catch {
                return .failure(ConfigProblems([ConfigProblem(path: "oauth.session.allowed_emails_file", line: nil, message: "'\(path)' \(error.message)")]))
            }
        }
        let tlsProblems = TLSWiring.check(config)
        if !tlsProblems.isEmpty { return .failure(ConfigProblems(tlsProblems)) }
        // Build the providers too (e.g. load Apple's key), so a file that passes check starts.
        if !config.oauth.providers.isEmpty {
            do {
                _ = try OAuthWiring.providers(config, http: CurlClient(caFile: config.oauth.caFile))
            } catch {
                return .failure(error)
            }
        }
        return .success(config)
    }

    /// `callback-proxy check [--config FILE] [flags]`: every problem on its own line, exit 0 or 1.
    /// Without a file it checks what the environment and the flags configure (containers).
    static func run(_ options: Options) -> Int32 {
        // The certificates and keys are loaded too (each file read once), so a file that
        // passes check starts.
        var loaded = load(options)
        var notes: [String] = []
        var storeTLS: UpstreamTLSClient? = nil
        if case .success(let c) = loaded {
            do throws(ConfigProblems) {
                let tls = try TLSWiring(c)
                storeTLS = tls.store
                for staple in tls.credentials?.ocspStaples ?? [] {
                    if let why = staple.unstapleable { notes.append("tls.ocsp_stapling: \(staple.subject) will not be stapled: \(why)") }
                }
            } catch {
                loaded = .failure(error)
            }
        }
        switch loaded {
        case .success(let c):
            print("\(options.configPath ?? "configuration"): ok\(options.online ? " offline" : "") "
                  + "(\(c.oauth.providers.count) provider(s), upstream \(c.upstream!))")
            if let warning = exposedInternalListener(c) { print("warning: " + warning) }
            if let warning = drainOutlastsStop(c, stopTimeout: options.stopTimeout) { print("warning: " + warning) }
            for warning in exposedTicketKeys(c) { print("warning: " + warning) }
            if let warning = maintenanceDirectoryMissing(c) { print("warning: " + warning) }
            if let session = c.oauth.session {
                let providers = c.oauth.providers.values.filter { $0.handoff == .session }
                for warning in session.rulesThatCannotMatch(sessionProviders: providers) { print("warning: " + warning) }
            }
            // Not a problem (a build machine may not see the production DNS), but worth saying:
            // started here, the proxy would answer 502 until the name resolves.
            if case .name(let name, let port) = c.upstream!.endpoint,
               case .failure(let error) = NameLookup.addresses(of: name, port: port) {
                print("note: the upstream name '\(name)' does not resolve here (\(error.reason)); "
                      + "started here, the proxy would answer 502 until it does")
            }
            for note in retiredGraphVersions(c, today: today()) + uncoveredHandBackCallbacks(c) + notes { print("note: " + note) }
            guard options.online else { return 0 }
            let found = OnlineCheck.problems(c, storeTLS: storeTLS)
            for note in found where note.isNote { print("note: \(note)") }
            let problems = found.filter { !$0.isNote }
            for p in problems { print("\(options.configPath ?? "configuration"): \(p)") }
            if !problems.isEmpty { print("\(problems.count) problem(s) online") } else {
                if !c.oauth.providers.isEmpty { print("online: every provider's documents fetched and usable") }
                if c.store.redis != nil { print("online: the store answered every command the proxy sends") }
            }
            return problems.isEmpty ? 0 : 1
        case .failure(let problems):
            for p in problems.items { print("\(options.configPath ?? "configuration"): \(p)") }
            print("\(problems.items.count) problem(s)")
            return 1
        }
    }

    /// The internal listener serves /metrics and, in relay mode, the token endpoint that hands
    /// out tokens for a relay code: bound beyond loopback, anyone who can reach the port can ask.
    /// Not a problem (a container's probes and a sidecar app need it so), but worth saying.
    static func exposedInternalListener(_ c: AppConfig) -> String? {
        guard let address = c.internalListen, !address.isLoopback else { return nil }
        return "internal_listen: \(address) is not a loopback address: /healthz, /readyz, /metrics and the relay token "
            + "endpoint answer anyone who can reach it; bind 127.0.0.1 unless a firewall or network policy keeps the port private"
    }

    /// A maintenance file in a directory that does not exist: most likely a mistyped path, under
    /// which the page can never turn on. A warning: the directory may be made at deploy time.
    static func maintenanceDirectoryMissing(_ c: AppConfig) -> String? {
        guard let file = c.proxy.maintenance.file else { return nil }
        let directory = String(file[..<(file.lastIndex(of: "/") ?? file.startIndex)])
        var info = stat()
        if stat(directory.isEmpty ? "/" : directory, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR { return nil }
        return "maintenance.file: the directory \(directory) does not exist here, so the page cannot turn on; "
            + "check the path (Capistrano: <deploy_to>/current/public/system/maintenance.html)"
    }

    /// A drain the supervisor would cut short: at its stop timeout it sends SIGKILL, and the
    /// requests still in flight are lost. A warning: the proxy itself runs either way.
    static func drainOutlastsStop(_ c: AppConfig, stopTimeout: UInt64?) -> String? {
        guard let stop = stopTimeout, c.proxy.timeouts.drain >= stop else { return nil }
        return "timeouts.drain: \(seconds(c.proxy.timeouts.drain)) does not fit in the stop timeout of \(seconds(stop)) "
            + "(TimeoutStopSec): a drain that long is cut short by SIGKILL; lower timeouts.drain or raise TimeoutStopSec"
    }

    private static func seconds(_ nanoseconds: UInt64) -> String {
        nanoseconds % Timeouts.second == 0 ? "\(nanoseconds / Timeouts.second)s" : "\(nanoseconds / 1_000_000)ms"
    }

    /// Facebook providers whose `endpoints.graph` names a Graph API version past its last day.
    /// A note, not a problem: the calls still work, answered by another version.
    static func retiredGraphVersions(_ c: AppConfig, today: Int) -> [String] {
        c.oauth.providers.values.sorted { $0.name < $1.name }.compactMap { p in
            guard p.kind == .facebook, let graph = p.endpoints.graph, let version = GraphAPIVersions.version(in: graph),
                  let retired = GraphAPIVersions.retirement(of: version, today: today) else { return nil }
            return "providers.\(p.name).endpoints.graph: Graph API \(version) is no longer served (\(retired), by Facebook's "
                + "changelog as of \(GraphAPIVersions.lastUpdated)); Facebook answers its calls with the oldest version still available. "
                + "Use \(GraphAPIVersions.newest) or leave endpoints.graph out"
        }
    }

    /// Session ticket key files that group or others may open: whoever reads a key decrypts
    /// every session it protected. A warning, not a problem: the proxy works, less safely.
    static func exposedTicketKeys(_ c: AppConfig) -> [String] {
        (c.tls?.sessionTicketKeyFiles ?? []).compactMap { file in
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & 0o077 != 0 else { return nil }
            let mode = String(info.st_mode & 0o777, radix: 8)
            return "tls.session_ticket_keys: '\(file)' has mode 0\(mode): group or others can read it, and a ticket key "
                + "decrypts every session it protected; chmod 0600 and own it by the user the proxy runs as"
        }
    }

    /// With `oauth.app_links.apple`, the apps may hand sign-ins back through universal links; a
    /// provider's `app_callback` the paths do not claim would open in Safari, not the app. A note:
    /// apps that only use native sign-in (`/_oauth_callback`) need no such path.
    static func uncoveredHandBackCallbacks(_ c: AppConfig) -> [String] {
        let callbacks = c.oauth.providers.values.sorted { $0.name < $1.name }.compactMap { p in
            p.appCallback.map { (provider: p.name, path: $0) }
        }
        return (c.oauth.appLinks?.uncoveredCallbacks(callbacks) ?? []).map { callback in
            "oauth.app_links.apple.paths: providers.\(callback.provider).app_callback \(callback.path) is not among them; "
                + "a hand-back sign-in returning there would open in Safari, not the app (leave paths out to claim every app_callback)"
        }
    }

    /// Today (UTC) as yyyymmdd.
    private static func today() -> Int {
        var t = time(nil)
        var parts = tm()
        gmtime_r(&t, &parts)
        return Int(parts.tm_year + 1900) * 10_000 + Int(parts.tm_mon + 1) * 100 + Int(parts.tm_mday)
    }
}
