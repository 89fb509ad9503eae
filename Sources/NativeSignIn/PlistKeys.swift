import Foundation

/// The top-level keys of one plist, read with their types checked. `PropertyListDecoder`
/// rather than `PropertyListSerialization` + `as?`: on Apple platforms `as? Bool` also accepts
/// `<integer>1</integer>` (NSNumber bridging) while Linux does not, and the loader must refuse
/// the same files everywhere.
struct PlistKeys {
    let file: String
    private let values: [String: Value]

    enum Value: Decodable {
        case bool(Bool)
        case string(String)
        case other

        init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let bool = try? container.decode(Bool.self) {
                self = .bool(bool)
            } else if let string = try? container.decode(String.self) {
                self = .string(string)
            } else {
                self = .other
            }
        }
    }

    init(_ data: Data, file: String) throws {
        self.file = file
        do {
            values = try PropertyListDecoder().decode([String: Value].self, from: data)
        } catch {
            throw NativeSignInError(.configuration, file: file, "is not a property list with a dictionary at its top")
        }
    }

    func problem(_ key: String, _ message: String) -> NativeSignInError {
        NativeSignInError(.configuration, file: file, key: key, message)
    }

    /// A string, nil when absent.
    func string(_ key: String) throws -> String? {
        switch values[key] {
        case nil: return nil
        case .string(let value): return value
        case .bool, .other: throw problem(key, "must be a string")
        }
    }

    /// A Bool: `<true/>`/`<false/>`, or the strings `YES`/`NO` an Xcode build setting
    /// substitutes (`$(OAUTH_ENABLED)`). Absent is false. Anything else — an unsubstituted
    /// `$(OAUTH_ENABLED)`, `1`, `maybe` — is an error, not "off".
    func flag(_ key: String) throws -> Bool {
        switch values[key] {
        case nil: return false
        case .bool(let value): return value
        case .string("YES"): return true
        case .string("NO"): return false
        case .string(let value): throw problem(key, "must be YES or NO (or a plist Bool), not \"\(value)\"")
        case .other: throw problem(key, "must be a Bool (or the string YES or NO)")
        }
    }
}
