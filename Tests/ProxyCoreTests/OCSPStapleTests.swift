import Foundation
import Testing
@testable import ProxyCore

/// OCSP stapling (`OCSPStaple`): what a handshake staples as the clock passes the response's
/// `nextUpdate`, and which responses survive a reload. The certificates and the responses
/// come from the `openssl` CLI (`openssl ocsp` answering a request file, no server).
@Suite struct OCSPStapleTests {
    @Test func aResponseIsNotStapledFromItsNextUpdateOn() throws {
        let pki = try OCSPTestPKI()
        defer { pki.remove() }
        let staple = try #require(try TLSCredentials(pki.settings()).ocspStaples.first)
        let now = Int64(time(nil))
        let response = try pki.response(for: staple, validMinutes: 1)
        guard case .stapled(_, let nextUpdate?) = staple.accept(response, now: now) else {
            Issue.record("a good response was not stapled")
            return
        }
        #expect(staple.stapledResponse(at: now) == response)
        #expect(staple.stapledResponse(at: nextUpdate - 1) == response)
        #expect(staple.stapledResponse(at: nextUpdate) == nil)
        #expect(staple.stapledResponse(at: nextUpdate + 51) == nil)
        // Held until the refresher drops it: the engine alone decides not to send it.
        #expect(staple.isStapled && staple.expiry == nextUpdate)
        staple.expire(now: nextUpdate)
        #expect(!staple.isStapled)
    }

    @Test func anUnchangedCertificateKeepsItsResponseWhateverElseAReloadChanges() throws {
        let pki = try OCSPTestPKI()
        defer { pki.remove() }
        let running = try TLSCredentials(pki.settings())
        let staple = try #require(running.ocspStaples.first)
        let response = try pki.response(for: staple, validMinutes: 60)
        guard case .stapled = staple.accept(response, now: Int64(time(nil))) else {
            Issue.record("a good response was not stapled")
            return
        }

        var changed = pki.settings()
        changed.hsts = HSTS(maxAge: 301)
        changed.sessionTicketKeyFiles = [try pki.ticketKey()]
        let reloaded = try TLSCredentials(changed, keeping: running)
        #expect(reloaded.ocspStaples.first?.stapledResponse(at: Int64(time(nil))) == response)

        // The same files re-read (SIGHUP, configuration unchanged).
        try reloaded.reload()
        #expect(reloaded.ocspStaples.first?.stapledResponse(at: Int64(time(nil))) == response)

        // Another certificate (a renewal) never gets the previous one's response.
        let renewed = try TLSCredentials(pki.settings(leaf: "renewed"), keeping: reloaded)
        #expect(renewed.ocspStaples.first?.isStapled == false)
    }
}

/// A CA, two leaves it issued (`leaf`, `renewed`: the same name, another serial) naming a
/// responder, and `openssl ocsp` to answer requests for them from an index.
private struct OCSPTestPKI {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "ocsp-staple-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                          "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=OCSP Unit CA",
                          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try "authorityInfoAccess=OCSP;URI:http://127.0.0.1:9/\n".write(toFile: path("leaf.ext"), atomically: true, encoding: .utf8)
        var index = ""
        for (name, serial) in [("leaf", 4096), ("renewed", 4097)] {
            try Self.openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                              "-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", "/CN=stapled.unit"])
            try Self.openssl(["x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                              "-set_serial", "\(serial)", "-days", "2", "-extfile", path("leaf.ext"), "-out", path("\(name).pem")])
            let chain = try String(contentsOfFile: path("\(name).pem"), encoding: .utf8)
                + String(contentsOfFile: path("ca.pem"), encoding: .utf8)
            try chain.write(toFile: path("\(name)-chain.pem"), atomically: true, encoding: .utf8)
            index += "V\t301231000000Z\t\t\(String(serial, radix: 16, uppercase: true))\tunknown\t/CN=stapled.unit\n"
        }
        try index.write(toFile: path("index.txt"), atomically: true, encoding: .utf8)
        // Both leaves have the same subject, which an index refuses unless told.
        try "unique_subject = no\n".write(toFile: path("index.txt.attr"), atomically: true, encoding: .utf8)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func settings(leaf: String = "leaf") -> TLSServerSettings {
        var s = TLSServerSettings(certFile: path("\(leaf)-chain.pem"), keyFile: path("\(leaf).key"))
        s.ocspStapling = true
        return s
    }

    /// The responder's signed `good` answer to `staple`'s own request, valid from now for
    /// `validMinutes`.
    func response(for staple: OCSPStaple, validMinutes: Int) throws -> [UInt8] {
        let request = try #require(staple.request())
        try Data(request).write(to: URL(fileURLWithPath: path("request.der")))
        try Self.openssl(["ocsp", "-index", path("index.txt"), "-rsigner", path("ca.pem"), "-rkey", path("ca.key"),
                          "-CA", path("ca.pem"), "-reqin", path("request.der"), "-respout", path("response.der"),
                          "-nmin", "\(validMinutes)"])
        return Array(try Data(contentsOf: URL(fileURLWithPath: path("response.der"))))
    }

    func ticketKey() throws -> String {
        try Self.openssl(["rand", "-out", path("ticket.key"), "80"])
        return path("ticket.key")
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    private static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw OCSPTestError("openssl \(arguments[0]) exited with \(process.terminationStatus): \(String(decoding: said, as: UTF8.self))")
        }
    }
}

private struct OCSPTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
