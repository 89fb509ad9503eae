import ProxyCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `oauth.session.allowed_emails_file`: one address a line, `#` starting a comment, blank lines
/// ignored, compared without case. Read at start (a missing or unreadable file stops the start,
/// and `check` names it), then looked at again at most once a second when a sign-in or a
/// request asks: a changed file (modification time, size or inode: an editor that writes a new
/// file and renames it counts) is read again, so adding or removing someone needs no reload. A
/// SIGHUP that changes the configuration builds a new one and reads it anew.
///
/// A file that becomes unreadable later keeps the last list that was read (emptying it would
/// lock everyone out for a typo in a deploy script), and an error line says so once a minute.
public final class AllowedEmailsFile: Sendable {
    public let path: String
    private struct State {
        var emails: Set<String>
        var identity: FileIdentity
        var checkedAt: UInt64
        var lastComplaint: UInt64 = 0
    }
    private let state: Mutex<State>
    private let log: Logger?
    static let recheckInterval: UInt64 = 1_000_000_000

    /// Reads the file now; throws the reason it cannot be used.
    public init(path: String, log: Logger? = nil, now: UInt64) throws(EmailsFileError) {
        self.path = path
        self.log = log
        let (emails, identity) = try Self.read(path)
        state = Mutex(State(emails: emails, identity: identity, checkedAt: now))
    }

    /// Whether `address` (lower-cased) is listed, looking at the file again when a second has
    /// passed since the last look.
    public func contains(_ address: String, now: UInt64) -> Bool {
        refreshIfDue(now: now)
        // The set finds canonically equivalent strings; only the same bytes count.
        return state.withLock { s in s.emails.firstIndex(of: address).map { s.emails[$0].sameBytes(address) } ?? false }
    }

    private func refreshIfDue(now: UInt64) {
        let due: FileIdentity? = state.withLock { s in
            guard now &- s.checkedAt >= Self.recheckInterval else { return nil }
            s.checkedAt = now
            return s.identity
        }
        guard let known = due else { return }
        // stat and read happen outside the lock: another loop asking meanwhile sees the old list.
        guard let current = FileIdentity(path), current != known else { return complainIfGone(now: now) }
        do {
            let (emails, identity) = try Self.read(path)
            state.withLock { s in
                s.emails = emails
                s.identity = identity
            }
            log?.info("allowed emails file read again", ["file": path, "addresses": "\(emails.count)",
                                                         "setting": "oauth.session.allowed_emails_file"])
        } catch {
            complain(error.message, now: now)
        }
    }

    private func complainIfGone(now: UInt64) {
        if FileIdentity(path) == nil { complain("cannot be read", now: now) }
    }

    private func complain(_ reason: String, now: UInt64) {
        let due = state.withLock { s -> Bool in
            guard s.lastComplaint == 0 || now &- s.lastComplaint >= 60 * Self.recheckInterval else { return false }
            s.lastComplaint = now
            return true
        }
        if due {
            log?.error("allowed emails file not usable; the last list read stays in force", [
                "file": path, "reason": reason, "setting": "oauth.session.allowed_emails_file",
            ])
        }
    }

    /// The addresses in the file, and what identifies the version read.
    static func read(_ path: String) throws(EmailsFileError) -> (Set<String>, FileIdentity) {
        guard let identity = FileIdentity(path) else { throw EmailsFileError(message: "cannot be read: \(String(cString: strerror(errno)))") }
        guard let text = readText(path) else { throw EmailsFileError(message: "cannot be read (or is larger than 16 MiB)") }
        return (parse(text), identity)
    }

    /// Addresses, one a line; `#…` comments and blank lines ignored; lines that are not an
    /// address are skipped (a header line, a name) rather than failing the whole list.
    static func parse(_ text: String) -> Set<String> {
        var out: Set<String> = []
        for raw in text.split(whereSeparator: \.isNewline) {
            var line = Substring(raw)
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let trimmed = line.trimming(" \t\r")
            guard !trimmed.isEmpty, let address = EmailAddress(trimmed) else { continue }
            out.insert(address.address)
        }
        return out
    }

    private static func readText(_ path: String) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n > 0 { bytes += chunk[0..<n] }
            if bytes.count > 16 << 20 { return nil }
            if n < chunk.count { break }
        }
        return ferror(f) != 0 ? nil : String(decoding: bytes, as: UTF8.self)
    }
}

/// Why the emails file cannot be used.
public struct EmailsFileError: Error, Sendable {
    public let message: String
}

/// Which version of a file was read: a rename over it changes the inode, an edit in place the
/// time or the size.
struct FileIdentity: Equatable {
    let inode: UInt64
    let size: Int64
    let modified: Int
    let modifiedNanos: Int

    init?(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = info.st_mtim.tv_sec
        modifiedNanos = info.st_mtim.tv_nsec
    }
}
