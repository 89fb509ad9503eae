import Foundation
import Testing
@testable import NativeSignIn

/// Contract/native-sign-in-vectors.json (format: Contract/README.md), the cases the Android core's
/// tests read too. Read from the repository through `#filePath` rather than copied into the test
/// target: a copy could drift from the file both platforms are held to, and SwiftPM would want it
/// declared as a resource.
struct ContractVectors: Decodable, Sendable {
    static let path = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Contract/native-sign-in-vectors.json")

    /// The file, decoded once. A file that cannot be read or decoded fails every test that asks
    /// for its cases (their arguments cannot be evaluated), naming the problem.
    static func file() throws -> ContractVectors {
        try decoded.get()
    }

    private static let decoded: Result<ContractVectors, VectorError> = {
        do {
            return .success(try JSONDecoder().decode(ContractVectors.self, from: Data(contentsOf: path)))
        } catch {
            return .failure(VectorError("\(path.path): \(error)"))
        }
    }()

    let format: String
    let platform: String
    let callbackPath: String
    let codeVerifier: String
    let codeChallenge: String
    let providers: [ProviderVector]
    let interception: [InterceptionCase]
    let nativeRequest: [NativeRequestCase]
    let state: [StateCase]
    let callbackURL: [CallbackCase]
    let errorMapping: [ErrorMappingCase]
    let configuration: Configurations

    enum CodingKeys: String, CodingKey {
        case format, platform, providers, interception, state, configuration
        case callbackPath = "callback_path", codeVerifier = "code_verifier", codeChallenge = "code_challenge"
        case nativeRequest = "native_request", callbackURL = "callback_url", errorMapping = "error_mapping"
    }

    /// The vectors' interceptor: their providers, their platform, and their fixed PKCE pair.
    func interceptor(callbackPath: String? = nil) throws -> SignInInterceptor {
        let verifier = try PKCE(verifier: codeVerifier)
        return SignInInterceptor(providers: try providers.map { try $0.provider() },
                                 platform: try #require(Platform(rawValue: platform)),
                                 callbackPath: callbackPath ?? self.callbackPath, pkce: { verifier })
    }

    /// The request the vectors' interceptor starts for a main-frame navigation to `url`.
    func request(_ url: String, callbackPath: String? = nil) throws -> AuthorizationRequest {
        let decision = try interceptor(callbackPath: callbackPath)
            .decide(Navigation(url: try #require(URL(string: url)), target: .mainFrame))
        guard case .startNativeSignIn(let request) = decision else {
            throw VectorError("no sign-in started for \(url): \(decision)")
        }
        return request
    }
}

struct VectorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A case is reported by its `name`.
protocol NamedCase: CustomTestStringConvertible, Sendable {
    var name: String { get }
}

extension NamedCase {
    var testDescription: String { name }
}

struct ProviderVector: Decodable, Sendable {
    let kind: String
    let name: String
    let clientID: String?
    let reversedClientID: String?
    let appID: String?
    let authorizationEndpoint: String?
    let redirectURI: String?
    let pkce: Bool?

    enum CodingKeys: String, CodingKey {
        case kind, name, pkce
        case clientID = "client_id", reversedClientID = "reversed_client_id", appID = "app_id"
        case authorizationEndpoint = "authorization_endpoint", redirectURI = "redirect_uri"
    }

    func provider() throws -> Provider {
        switch kind {
        case "google":
            return try .google(clientID: try #require(clientID), reversedClientID: try #require(reversedClientID))
        case "facebook":
            return try .facebook(appID: try #require(appID))
        case "oidc":
            let endpoint = try #require(authorizationEndpoint.flatMap { URL(string: $0) })
            return try .oidc(name: name, authorizationEndpoint: endpoint, clientID: try #require(clientID),
                             redirectURI: try #require(redirectURI), usesPKCE: try #require(pkce as Bool?))
        default:
            throw VectorError("unknown provider kind \(kind)")
        }
    }
}

/// `{"decision":"allow"}`, `{"decision":"start","provider"?,"state"?}`, `{"decision":"refuse","key"}`.
struct DecisionExpectation: Decodable, Sendable {
    let decision: String
    let provider: String?
    let state: String?
    let key: String?
}

struct InterceptionCase: Decodable, NamedCase {
    let name: String
    let url: String
    let target: String
    let expect: DecisionExpectation
}

struct StateCase: Decodable, NamedCase {
    let name: String
    let query: String
    let expect: DecisionExpectation
}

struct NativeRequestCase: Decodable, NamedCase {
    struct Expectation: Decodable, Sendable {
        let nativeURL: String
        let endpoint: String
        let state: String
        let provider: String
        let clientID: String
        let redirectURI: String
        let callbackScheme: String
        let codeVerifier: String?

        enum CodingKeys: String, CodingKey {
            case endpoint, state, provider
            case nativeURL = "native_url", clientID = "client_id", redirectURI = "redirect_uri"
            case callbackScheme = "callback_scheme", codeVerifier = "code_verifier"
        }
    }

    let name: String
    let url: String
    let expect: Expectation
}

/// A vector's URL and its query as written. Foundation on Linux re-encodes a malformed escape
/// (`%ZZ` becomes `%25ZZ`; `URLComponents` traps on one), where a WebView hands the URL over as
/// written: `reencoded` says the `URL` no longer says what the vector says, and `query` is the
/// text between `?` and `#` for the library's raw-query entries.
struct WrittenURL {
    let url: URL
    let query: String?
    let reencoded: Bool

    init(_ text: String) throws {
        url = try #require(URL(string: text))
        reencoded = URL(string: text, encodingInvalidCharacters: false) == nil
        let beforeFragment = text.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        query = beforeFragment.firstIndex(of: "?").map { String(beforeFragment[beforeFragment.index(after: $0)...]) }
    }
}

/// `{"kind":"redirect","url"}`, `{"kind":"cancelled"}`, `{"kind":"failed"}`.
struct ResultVector: Decodable, Sendable {
    let kind: String
    let url: String?

    func browserResult() throws -> BrowserResult {
        switch kind {
        case "redirect": return .redirect(try #require(url.flatMap { URL(string: $0) }))
        case "cancelled": return .cancelled
        case "failed": return .failed
        default: throw VectorError("unknown result kind \(kind)")
        }
    }
}

struct CallbackCase: Decodable, NamedCase {
    struct Expectation: Decodable, Sendable {
        let url: String?
        let errorKey: String?

        enum CodingKeys: String, CodingKey {
            case url
            case errorKey = "error_key"
        }
    }

    let name: String
    let siteURL: String
    let initialURL: String
    let result: ResultVector
    let callbackPath: String?
    let expect: Expectation

    enum CodingKeys: String, CodingKey {
        case name, result, expect
        case siteURL = "site_url", initialURL = "initial_url", callbackPath = "callback_path"
    }
}

struct ErrorMappingCase: Decodable, NamedCase {
    struct Expectation: Decodable, Sendable {
        let code: String?
        let error: String?
    }

    let name: String
    let siteURL: String
    let result: ResultVector
    let expect: Expectation

    enum CodingKeys: String, CodingKey {
        case name, result, expect
        case siteURL = "site_url"
    }
}

struct Configurations: Decodable, Sendable {
    /// Not read here: BuildConfig fields are the Android core's input (ContractVectorsTest.kt);
    /// the Swift library has no reader for them. Kept to check the section is there.
    let android: [AndroidConfigurationCase]
    let ios: [IOSConfigurationCase]
}

struct AndroidConfigurationCase: Decodable, Sendable {
    let name: String
}

/// `{"enabled","providers":[…]}` or `{"error_file","error_key"}`.
struct ConfigurationExpectation: Decodable, Sendable {
    struct ProviderFields: Decodable, Equatable, Sendable {
        let name: String
        let clientID: String
        let redirectURI: String
        let callbackScheme: String
        let pkce: Bool

        enum CodingKeys: String, CodingKey {
            case name, pkce
            case clientID = "client_id", redirectURI = "redirect_uri", callbackScheme = "callback_scheme"
        }
    }

    let enabled: Bool?
    let providers: [ProviderFields]?
    let errorFile: String?
    let errorKey: String?

    enum CodingKeys: String, CodingKey {
        case enabled, providers
        case errorFile = "error_file", errorKey = "error_key"
    }
}

struct IOSConfigurationCase: Decodable, NamedCase {
    let name: String
    let infoPlist: PlistValue
    /// Absent: the app bundle has no GoogleService-Info.plist.
    let googleServiceInfo: PlistValue?
    let expect: ConfigurationExpectation

    enum CodingKeys: String, CodingKey {
        case name, expect
        case infoPlist = "info_plist", googleServiceInfo = "google_service_info"
    }
}

/// A plist value as the vectors write it in JSON: strings, booleans, arrays and dictionaries
/// (the format has no numbers and no null).
enum PlistValue: Decodable, Sendable {
    case string(String)
    case bool(Bool)
    case array([PlistValue])
    case dictionary([String: PlistValue])

    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([PlistValue].self) {
            self = .array(value)
        } else {
            self = .dictionary(try container.decode([String: PlistValue].self))
        }
    }

    /// Foundation's property-list objects, as PropertyListSerialization writes them on every
    /// platform (NSNumber for a Bool: Linux does not bridge a Swift Bool by itself).
    var propertyList: Any {
        switch self {
        case .string(let value): return NSString(string: value)
        case .bool(let value): return NSNumber(value: value)
        case .array(let values): return NSArray(array: values.map(\.propertyList))
        case .dictionary(let values):
            let dictionary = NSMutableDictionary()
            for (key, value) in values { dictionary[NSString(string: key)] = value.propertyList }
            return dictionary
        }
    }

    /// The value as an XML plist file at `url`.
    func write(to url: URL) throws {
        try PropertyListSerialization.data(fromPropertyList: propertyList, format: .xml, options: 0).write(to: url)
    }
}
