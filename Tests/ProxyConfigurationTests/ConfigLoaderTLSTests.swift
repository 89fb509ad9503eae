import ProxyCore
import Testing
@testable import ProxyConfiguration

@Suite struct ConfigLoaderTLSTests {
    func load(_ text: String) -> Result<AppConfig, ConfigProblems> {
        // TLS files are only named in the configuration: nothing is read while loading it
        // (except a CA bundle's existence, like oauth.ca_file).
        ConfigLoader(environment: [:], readFile: { $0 == "/tls/ca.pem" ? "-----BEGIN CERTIFICATE-----\n" : nil }).load(text: text)
    }

    func problems(_ text: String) -> [String] {
        switch load(text) {
        case .success: return []
        case .failure(let p): return p.items.map { "\($0.path): \($0.message)" }
        }
    }

    @Test func ticketKeysAndHSTSLoad() throws {
        let c = try load("""
        upstream: http://127.0.0.1:3000
        tls:
          cert: /tls/server.pem
          key: /tls/server.key
          session_ticket_keys: [/tls/new.key, /tls/old.key]
          hsts: { include_subdomains: true, preload: true }
          ocsp_stapling: true
        """).get()
        let tls = try #require(c.tls)
        #expect(tls.ocspStapling)
        #expect(tls.sessionTicketKeyFiles == ["/tls/new.key", "/tls/old.key"])
        #expect(tls.hsts == HSTS(maxAge: 63_072_000, includeSubdomains: true, preload: true))
        #expect(tls.hsts?.headerValue == "max-age=63072000; includeSubDomains; preload")
        #expect(HSTS(maxAge: 300).headerValue == "max-age=300")
    }

    @Test(arguments: [
        ("{ preload: true }", "tls.hsts.preload: needs include_subdomains: true and max_age of at least 31536000"),
        ("{ max_age: 86400, include_subdomains: true, preload: true }", "tls.hsts.preload: needs include_subdomains"),
        ("{ max_age: -1 }", "tls.hsts.max_age:"),
    ])
    func hstsMistakesAreNamed(_ hsts: String, _ expected: String) {
        let p = problems("""
        upstream: http://127.0.0.1:3000
        tls: { cert: /tls/server.pem, key: /tls/server.key, hsts: \(hsts) }
        """)
        #expect(p.count == 1 && p[0].hasPrefix(expected), "\(p)")
    }

    @Test func everyTLSKeyLoads() throws {
        let c = try load("""
        listen: 0.0.0.0:8443
        upstream: https://10.0.0.5:443
        redirect_http: 0.0.0.0:8080
        timeouts: { tls_handshake: 3s }
        tls:
          cert: /tls/server.pem
          key: /tls/server.key
          min_version: "1.3"
          sni:
            - names: [a.example, "*.b.example"]
              cert: /tls/a.pem
              key: /tls/a.key
            - names: c.example
              cert: /tls/c.pem
              key: /tls/c.key
        upstream_tls: { ca: /tls/ca.pem, client_cert: /tls/client.pem, client_key: /tls/client.key, server_name: app.internal }
        """).get()
        let tls = try #require(c.tls)
        #expect(tls.certFile == "/tls/server.pem")
        #expect(tls.keyFile == "/tls/server.key")
        #expect(tls.minVersion == .tls13)
        #expect(tls.sni == [SNICertificate(names: ["a.example", "*.b.example"], certFile: "/tls/a.pem", keyFile: "/tls/a.key"),
                            SNICertificate(names: ["c.example"], certFile: "/tls/c.pem", keyFile: "/tls/c.key")])
        #expect(c.redirectHTTP?.description == "0.0.0.0:8080")
        #expect(c.proxy.timeouts.tlsHandshake == 3_000_000_000)
        #expect(c.upstream?.tls == true)
        #expect(c.upstreamTLS == UpstreamTLSSettings(caFile: "/tls/ca.pem", clientCertFile: "/tls/client.pem",
                                                     clientKeyFile: "/tls/client.key", serverName: "app.internal"))
    }

    @Test func defaultsWithoutATLSSection() throws {
        let c = try load("upstream: http://127.0.0.1:3000").get()
        #expect(c.tls == nil)
        #expect(c.redirectHTTP == nil)
        #expect(c.upstreamTLS.isDefault)
        #expect(c.proxy.timeouts.tlsHandshake == 10_000_000_000)
        #expect(try load("tls: { cert: /c, key: /k }").get().tls?.minVersion == .tls12)
    }

    @Test func everyTLSProblemIsReportedWithItsPath() {
        let p = problems("""
        redirect_http: unix:/tmp/x.sock
        tls:
          key: /tls/server.key
          min_version: "1.1"
          ciphers: ALL
          sni:
            - names: [a.example, "bad name", "a.*.example"]
              cert: /tls/a.pem
            - cert: /tls/b.pem
              key: /tls/b.key
            - names: [A.EXAMPLE]
              cert: /tls/c.pem
              key: /tls/c.key
              extra: 1
        upstream_tls: { ca: /missing.pem, client_cert: /tls/client.pem, server_name: "not a name" }
        """)
        #expect(p.contains("redirect_http: 'unix:/tmp/x.sock' is not HOST:PORT or [V6]:PORT"))
        #expect(p.contains("tls.cert: is required"))
        #expect(p.contains("tls.min_version: '1.1' is not 1.2 or 1.3"))
        #expect(p.contains("tls.ciphers: unknown key"))
        #expect(p.contains("tls.sni[0].names: 'bad name' is not a DNS name or *.domain pattern"))
        #expect(p.contains("tls.sni[0].names: 'a.*.example' is not a DNS name or *.domain pattern"))
        #expect(p.contains("tls.sni[0].key: is required"))
        #expect(p.contains("tls.sni[1].names: is required (the server names this certificate serves)"))
        #expect(p.contains("tls.sni[2].names: 'A.EXAMPLE' is already served by tls.sni[0]"))
        #expect(p.contains("tls.sni[2].extra: unknown key"))
        #expect(p.contains("upstream_tls.ca: cannot read '/missing.pem'"))
        #expect(p.contains("upstream_tls.client_key: client_cert and client_key go together"))
        #expect(p.contains("upstream_tls.server_name: 'not a name' is not a DNS name or an IP address"))
        #expect(p.count == 13, "\(p)")
    }

    @Test func sniMustBeAList() {
        #expect(problems("tls: { cert: /c, key: /k, sni: { names: [a.example] } }")
                == ["tls.sni: must be a list of { names, cert, key }, not a mapping"])
    }
}
