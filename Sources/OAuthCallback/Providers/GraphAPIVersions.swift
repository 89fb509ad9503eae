/// Facebook's Graph API versions and the last day each answers, as Facebook's changelog
/// ("Graph API versions", developers.facebook.com/docs/graph-api/changelog/versions) publishes
/// them; table last updated 2026-12-01. A call to a retired version is silently served by the
/// oldest version still available, so behaviour would change under the operator's feet: the
/// default is the newest version, and `check` says when `endpoints.graph` names a retired one.
/// Update `newest` and the table when Facebook publishes a version.
public enum GraphAPIVersions {
    public static let newest = "v26.0"
    public static let lastUpdated = "2026-12-01"

    /// Last day (UTC, yyyymmdd) of each version that has one; the newest ones have none yet.
    static let availableUntil: [String: Int] = [
        "v16.0": 2025_05_14, "v17.0": 2025_09_12, "v18.0": 2026_01_26, "v19.0": 2026_05_21,
        "v20.0": 2026_09_24, "v21.0": 2027_01_21, "v22.0": 2027_05_20, "v23.0": 2027_10_08,
        "v24.0": 2028_02_18, "v25.0": 2028_07_29,
    ]

    /// The version a Graph base URL names (`https://graph.facebook.com/v19.0` → `v19.0`).
    public static func version(in url: String) -> String? {
        guard let last = url.split(separator: "/").last, last.hasPrefix("v"),
              last.dropFirst().split(separator: ".").count == 2,
              last.dropFirst().split(separator: ".").allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) }) else { return nil }
        return String(last)
    }

    /// When `version` stopped answering, if it has by `today` (yyyymmdd): "available until
    /// <its last day>", or "retired before <the oldest listed day>" for versions older than the table.
    public static func retirement(of version: String, today: Int) -> String? {
        if let last = availableUntil[version] { return last < today ? "available until " + format(last) : nil }
        guard let major = Int(version.dropFirst().split(separator: ".").first ?? ""), major < 16 else { return nil }
        return "retired before " + format(availableUntil["v16.0"]!)
    }

    private static func format(_ day: Int) -> String {
        let y = day / 10_000, m = day / 100 % 100, d = day % 100
        return "\(y)-\(m < 10 ? "0" : "")\(m)-\(d < 10 ? "0" : "")\(d)"
    }
}
