/// The operator's own HTML for the proxy's error answers (`error_pages:`), by status (`"502"`)
/// or class (`"5xx"`, `"4xx"`): the file's text, read when the configuration is. In it,
/// `{{status}}`, `{{title}}`, `{{message}}` and `{{request_id}}` are replaced (HTML-escaped).
/// Without one, `ErrorPage`'s own page is used.
public struct ErrorPageSettings: Sendable, Equatable {
    public var templates: [String: String] = [:]

    public init() {}

    /// The keys a template may be given under.
    public static func isKey(_ key: String) -> Bool {
        if key == "4xx" || key == "5xx" { return true }
        guard let status = Int(key) else { return false }
        return (400...599).contains(status)
    }

    func template(for status: Int) -> String? {
        templates[String(status)] ?? templates["\(status / 100)xx"]
    }
}
