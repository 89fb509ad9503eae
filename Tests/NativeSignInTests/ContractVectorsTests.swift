import Foundation
import Testing
@testable import NativeSignIn

/// Every case of Contract/native-sign-in-vectors.json that the Swift library decides, one test
/// argument each, reported by the case's name. `configuration.android` is the Android core's
/// alone (BuildConfig fields; ContractVectorsTest.kt reads it): the Swift library has no reader
/// for them, so only its presence is checked here.
@Suite struct ContractVectorsTests {

    @Test func theVectorFileHasEverySectionFilled() throws {
        let vectors = try ContractVectors.file()
        #expect(vectors.format == "1")
        for (section, count) in [("interception", vectors.interception.count), ("native_request", vectors.nativeRequest.count),
                                 ("state", vectors.state.count), ("callback_url", vectors.callbackURL.count),
                                 ("error_mapping", vectors.errorMapping.count),
                                 ("configuration.ios", vectors.configuration.ios.count),
                                 ("configuration.android", vectors.configuration.android.count)] {
            #expect(count >= 5, "\(section) has \(count) cases")
        }
        #expect(try PKCE(verifier: vectors.codeVerifier).challenge == vectors.codeChallenge)
    }

    @Test(arguments: try ContractVectors.file().interception)
    func interception(_ vector: InterceptionCase) throws {
        let target: Navigation.Target
        switch vector.target {
        case "mainFrame": target = .mainFrame
        case "popup": target = .popup
        case "subframe": target = .subframe
        default: throw VectorError("unknown target \(vector.target)")
        }
        let written = try WrittenURL(vector.url)
        let navigation = Navigation(url: written.url, target: target)
        try Self.check(try ContractVectors.file().interceptor().decide(navigation, query: written.query), against: vector.expect)
    }

    @Test(arguments: try ContractVectors.file().state)
    func state(_ vector: StateCase) throws {
        let written = try WrittenURL("https://accounts.google.com/o/oauth2/v2/auth?" + vector.query)
        let navigation = Navigation(url: written.url, target: .mainFrame)
        try Self.check(try ContractVectors.file().interceptor().decide(navigation, query: written.query), against: vector.expect)
    }

    @Test(arguments: try ContractVectors.file().nativeRequest)
    func nativeRequest(_ vector: NativeRequestCase) throws {
        let request = try ContractVectors.file().request(vector.url)
        let expect = vector.expect
        #expect(request.url.absoluteString == expect.nativeURL)
        // What AppAuth is given on Android: the native URL without its query. Here it shows that the
        // site's endpoint (host, port, versioned path) is kept as written.
        var endpoint = try #require(URLComponents(url: request.url, resolvingAgainstBaseURL: false))
        endpoint.percentEncodedQuery = nil
        #expect(endpoint.url?.absoluteString == expect.endpoint)
        #expect(request.state == expect.state)
        #expect(request.provider == expect.provider)
        #expect(request.clientID == expect.clientID)
        #expect(request.redirectURI == expect.redirectURI)
        #expect(request.callbackScheme == expect.callbackScheme)
        #expect(request.codeVerifier == expect.codeVerifier)
    }

    @Test(arguments: try ContractVectors.file().callbackURL)
    func callbackURL(_ vector: CallbackCase) throws {
        let request = try ContractVectors.file().request(vector.siteURL, callbackPath: vector.callbackPath)
        let initialURL = try #require(URL(string: vector.initialURL))
        let result = try vector.result.browserResult()
        if let key = vector.expect.errorKey {
            let error = try #require(throws: NativeSignInError.self) {
                try request.callbackURL(initialURL: initialURL, result: result)
            }
            #expect(error.key == key)
            #expect(error.kind == .initialURL)
        } else {
            let url = try request.callbackURL(initialURL: initialURL, result: result)
            #expect(url.absoluteString == vector.expect.url)
        }
    }

    @Test(arguments: try ContractVectors.file().errorMapping)
    func errorMapping(_ vector: ErrorMappingCase) throws {
        let request = try ContractVectors.file().request(vector.siteURL)
        let written = try vector.result.url.map { try WrittenURL($0) }
        // A redirect Foundation cannot hold as written (`code=%ZZ`) is read from its query as
        // written; such vectors are on the request's own redirect URI.
        let outcome = written?.reencoded == true
            ? AuthorizationRequest.outcome(ofRedirectQuery: written?.query, state: request.state)
            : request.outcome(of: try vector.result.browserResult())
        if case .code(let code) = outcome {
            #expect(code == vector.expect.code)
            #expect(vector.expect.error == nil)
        } else {
            #expect(outcome.errorWord == vector.expect.error)
            #expect(vector.expect.code == nil)
        }
    }

    /// The case's dictionaries written as the app bundle's plists, then read by the library's loader.
    @Test(arguments: try ContractVectors.file().configuration.ios)
    func iosConfiguration(_ vector: IOSConfigurationCase) throws {
        let bundle = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: bundle) }
        let info = bundle.appendingPathComponent(NativeSignInConfiguration.infoPlistName)
        try vector.infoPlist.write(to: info)
        var google: URL?
        if let plist = vector.googleServiceInfo {
            google = bundle.appendingPathComponent(NativeSignInConfiguration.googleServiceInfoName)
            try plist.write(to: google!)
        }

        let expect = vector.expect
        if let key = expect.errorKey {
            let error = try #require(throws: NativeSignInError.self) {
                try NativeSignInConfiguration.load(infoPlist: info, googleServiceInfo: google)
            }
            #expect(error.key == key, "\(error)")
            #expect(error.file == expect.errorFile, "\(error)")
            #expect(error.kind == .configuration)
        } else {
            let configuration = try NativeSignInConfiguration.load(infoPlist: info, googleServiceInfo: google)
            #expect(configuration.enabled == expect.enabled)
            #expect(configuration.providers.map {
                ConfigurationExpectation.ProviderFields(name: $0.name, clientID: $0.clientID, redirectURI: $0.redirectURI,
                                                        callbackScheme: $0.callbackScheme, pkce: $0.usesPKCE)
            } == expect.providers)
        }
    }

    private static func check(_ decision: NavigationDecision, against expect: DecisionExpectation) throws {
        switch (expect.decision, decision) {
        case ("allow", .allow):
            break
        case ("start", .startNativeSignIn(let request)):
            if let provider = expect.provider { #expect(request.provider == provider) }
            if let state = expect.state { #expect(request.state == state) }
        case ("refuse", .refuse(let error)):
            #expect(error.key == expect.key)
            #expect(error.kind == .navigation)
        default:
            Issue.record("expected \(expect.decision), got \(decision)")
        }
    }
}
