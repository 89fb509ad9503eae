import Testing
@testable import ProxyConfiguration

/// `ConfigLoader.keys` is the loader's own list of what it accepts: environment overrides are
/// derived from it and docs/reference.md is held to it. These tests keep the three together.
@Suite struct ConfigKeysTests {
    /// Every branch of the loader: each provider kind, each `…_env`/`…_file` pair, TLS with SNI.
    static let everything = """
    listen: 127.0.0.1:9000
    internal_listen: 127.0.0.1:9001
    upstreams: [{ url: https://10.0.0.5:443, weight: 2 }, { url: https://10.0.0.6:443, backup: true }]
    upstream_health: { max_fails: 3, fail_timeout: 20s, fail_statuses: [503], check_path: /up, check_interval: 2s, check_timeout: 1s, check_status: 200-299 }
    upstream_balance: least_conn
    upstream_retry_statuses: [502, 503]
    upstream_groups:
      cable: { upstream: http://10.0.0.11:8080, balance: hash client_address, timeouts: { upstream_connect: 1s, upstream: 1h }, x_accel_redirect: true }
      api:
        upstreams: [{ url: http://10.0.0.21:3000, weight: 2 }, { url: http://10.0.0.22:3000, backup: true }]
        health: { max_fails: 2, fail_timeout: 5s, fail_statuses: [502], check_path: /up, check_interval: 2s, check_timeout: 1s, check_status: 200 }
        retry_statuses: [503]
    routes: [{ paths: [/cable], upstream_group: cable }, { hosts: [api.example.com], paths: [/v1], upstream_group: api }]
    loops: 2
    store: rediss://10.0.0.7:6379/0
    store_password_env: REDIS_PW
    store_wait_replicas: 1
    store_wait_timeout: 50ms
    store_tls_ca: /tls/ca.pem
    store_tls_client_cert: /tls/client.pem
    store_tls_client_key: /tls/client.key
    access_log: off
    log: { level: warn, format: text }
    limits: { max_body_size: 10m, max_header_size: 16k, max_connections: 5000, upstream_idle_connections: 256,
              max_connections_per_client: 200, exempt_clients: [192.0.2.0/24], dry_run: true }
    rate_limits: [{ name: login, paths: [/users/sign_in], rate: 10/m, burst: 5, clients: 4096, dry_run: false }]
    client_access: [{ name: admin, paths: [/admin], allow: [10.0.0.0/8], deny: [10.9.0.0/16] }]
    maintenance: { file: /srv/app/public/system/maintenance.html, allow_paths: [/up], allow_clients: [10.0.0.0/8], retry_after: 120s }
    timeouts: { client_header: 5s, client_body: 30s, client_send: 20s, upstream_idle: 4s, keepalive: 1m, upstream_connect: 2s, upstream: 20s, drain: 10s, tls_handshake: 3s }
    trusted_proxies: [10.0.0.0/8]
    allow_underscores_in_headers: true
    tls:
      cert: /tls/server.pem
      key: /tls/server.key
      min_version: "1.3"
      http2: false
      sni: [{ names: [a.example.com], cert: /tls/a.pem, key: /tls/a.key }]
      session_ticket_keys: [/tls/ticket1.key, /tls/ticket0.key]
      ocsp_stapling: true
      hsts: { max_age: 31536000, include_subdomains: true, preload: true }
    redirect_http: 0.0.0.0:8080
    http2: { cleartext: true, max_concurrent_streams: 64, stream_window: 128k, connection_window: 2m, max_resets_per_second: 20, reset_burst: 200,
             glitch_burst: 500, max_glitches_per_second: 50 }
    http3: { enabled: true, max_streams: 50, stream_window: 128k, connection_window: 4m, idle_timeout: 1m, retry: auto,
             retry_above_handshakes: 64, alt_svc_max_age: 1h, early_data: true, glitch_burst: 2000, max_glitches_per_second: 200 }
    compression: { enabled: true, codings: [gzip, br], gzip_level: 6, brotli_quality: 5, min_length: 1k, types: [text/*, application/json],
                   exclude_paths: [/account], max_memory: 128m }
    error_pages: { "502": /pages/502.html, 5xx: /pages/5xx.html }
    buffering: { responses: 8m, requests: 1m, max_memory: 256m }
    splice: { enabled: true, min_size: 128k, max_pipes: 64 }
    static: { root: /tmp, immutable_paths: [/assets, /packs], precompressed: false, symlinks_outside_root: true }
    x_accel_redirect: [{ location: /_files, root: /tmp }]
    headers:
      request: { set: { X-Env: production }, add: { X-Trace: "{request_id}" }, remove: [X-Debug] }
      response: { set: { X-Frame-Options: DENY }, add: { X-Served-By: edge }, remove: [Server] }
    upstream_tls: { ca: /tls/ca.pem, client_cert: /tls/client.pem, client_key: /tls/client.key, server_name: app.internal }
    oauth:
      callback_path: /_oauth_callback
      replay_window: 15m
      clock_leeway: 2m
      ca_file: /tls/ca.pem
      idp_timeout: 5s
      provider_check_interval: 10m
      relay_token_path: /_oauth/token
      relay_code_ttl: 30s
      app_links:
        apple: { app_ids: [ABCDE12345.com.example.app], paths: ["/_oauth_callback*"] }
        android: [{ package: com.example.app, sha256_cert_fingerprints: ["14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5"] }]
      session:
        secret_env: SESSION_SECRET
        previous_secret_file: /keys/old-session
        cookie_name: _s
        cookie_domain: .example.com
        lifetime: 12h
        idle_timeout: 30m
        refresh_interval: 15m
        secure: true
        pass_access_token: false
        allowed_redirect_hosts: [app.example.com]
        protect: [/admin]
        skip: [/admin/health]
        server_side: true
        revocation: true
        error_url: /signin-failed
        web_redirect_uri: https://app.example.com/_oauth/web_callback
        allowed_email_domains: [example.com, .example.org]
        allowed_emails: [alice@example.net]
        allowed_emails_file: /keys/emails
        allowed_groups: [staff]
        allowed_claims: [{ claim: tier, in: [gold] }, { claim: dept, equals: x }, { claim: roles, contains: y }]
        allowed_hosted_domains: [example.com]
        groups_claim: realm_access.roles
        bearer_tokens: [google]
        extra_jwt_issuers: [{ issuer: https://login.partner.example, audiences: [api://orders], jwks_uri: https://login.partner.example/keys }]
        sign_out: { at_provider: true, post_logout_redirect_uri: "https://app.example.com/signed-out" }
        headers: { user: X-WEBAUTH-USER, user_claim: email, email: X-WEBAUTH-EMAIL, preferred_username: X-WEBAUTH-LOGIN, groups: X-WEBAUTH-GROUPS, access_token: X-WEBAUTH-TOKEN }
        jwt_assertion: { signing_key_file: /keys/assertion.pem, previous_signing_key_env: OLD_ASSERTION_KEY, header: X-WEBAUTH-JWT, issuer: https://app.example.com, audience: grafana, lifetime: 2m }
        path_rules:
          - { prefix: /admin, allowed_groups: [admins], allowed_emails: [root@example.com], allowed_email_domains: [example.com], allowed_hosted_domains: [example.com] }
          - { prefix: /billing, allowed_claims: [{ claim: tier, in: [gold] }, { claim: dept, equals: x }, { claim: roles, contains: y }] }
    providers:
      google:
        handoff: relay
        display_name: Google Workspace
        app_callback: /users/auth/google_oauth2/callback
        app_client: { id: web-id, secret_file: /keys/web }
        endpoints: { token: https://t.example, jwks: https://j.example, issuer: https://i.example, discovery: https://d.example,
                     authorization: https://a.example, userinfo: https://u.example, graph: https://g.example,
                     end_session: https://e.example/logout }
        relay: { omit_id_token: true, omit_refresh_token: true }
        algorithms: [RS256]
        native:
          ios: { client_id: 123-ios.apps.googleusercontent.com }
      facebook:
        handoff: params
        app_callback: /users/auth/facebook/callback
        app_id: "1234567890"
        app_secret_env: FB_SECRET
        native: { ios: { client_id: "1234567890" } }
      apple:
        handoff: verify
        app_client: { id: com.example.web, secret_env: WEB_SECRET }
        team_id: TEAM
        key_id: KEY
        private_key_file: /keys/apple.p8
        native: { ios: { client_id: com.example.app, redirect_uri: "com.example.app:/callback" } }
      corp:
        kind: oidc
        handoff: session
        app_client: { id: corp-web, secret_env: WEB_SECRET, client_auth: client_secret_basic }
        endpoints: { issuer: https://login.example.com, authorization: https://login.example.com/authorize }
        native: { android: { client_id: corp, redirect_uri: "com.example.app:/cb", client_secret_env: CORP_SECRET, client_auth: client_secret_basic } }
    """

    static let env = ["REDIS_PW": "pw", "SESSION_SECRET": String(repeating: "s", count: 40), "FB_SECRET": "fb",
                      "WEB_SECRET": "web", "CORP_SECRET": "corp", "OLD_ASSERTION_KEY": p256]
    /// A P-256 key (openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt).
    static let p256 = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQVogxGC0/BuSrlmG
        D6nxLRycC/k81VLgldHKLJMD6dehRANCAATxmxWH/ziswZR0yhMfZ49zbt/W3PlX
        /ZjsZgJ/eQgo0VHIa9JEAzcmVqxm/3LKPJmxoEw7SsMwgrWDcFssF1Jy
        -----END PRIVATE KEY-----
        """
    static let files = ["/tls/ca.pem": "-----BEGIN CERTIFICATE-----\n", "/pages/502.html": "<p>{{title}}</p>",
                        "/pages/5xx.html": "<p>{{status}}</p>", "/keys/old-session": String(repeating: "o", count: 40),
                        "/keys/web": "web", "/keys/assertion.pem": p256, "/keys/apple.p8": "-----BEGIN PRIVATE KEY-----\nMIG...\n-----END PRIVATE KEY-----\n"]

    @Test func theLoaderReadsExactlyTheListedKeys() throws {
        let loader = ConfigLoader(environment: Self.env, readFile: { Self.files[$0] })
        let (result, read) = loader.read(text: Self.everything)
        _ = try result.get()
        let listed = Set(ConfigLoader.keys.map(\.path))
        #expect(read.subtracting(listed).sorted() == [], "read by the loader but missing from ConfigLoader.keys")
        #expect(listed.subtracting(read).sorted() == [], "listed in ConfigLoader.keys but never read (or missing from this test's file)")
        #expect(ConfigLoader.keys.count == listed.count, "a key is listed twice")
    }

    @Test func everyValueKeyWithAFixedPathHasAVariable() {
        #expect(ConfigKey("timeouts.upstream").environmentVariable == "CALLBACK_PROXY_TIMEOUTS__UPSTREAM")
        #expect(ConfigKey("internal_listen").environmentVariable == "CALLBACK_PROXY_INTERNAL_LISTEN")
        #expect(ConfigKey("tls", .section).environmentVariable == nil)
        #expect(ConfigKey("tls.sni[].cert").environmentVariable == nil)
        #expect(ConfigKey("providers.<name>.kind").environmentVariable == nil)
        // `__` separates levels, so no key may contain it (it would be read as two levels).
        #expect(ConfigLoader.keys.filter { $0.path.contains("__") }.isEmpty)
    }
}
