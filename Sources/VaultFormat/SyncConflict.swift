import Glibc
import VaultSystem

/// A file a sync client left beside a vault file it could not merge: that file as another machine
/// wrote it while this one wrote it too. Each client has its own naming:
///
///     index/journal.sync-conflict-20261204-101010-ABCDEFG         Syncthing; before the extension
///     vault.sync-conflict-20261204-101010-ABCDEFG.header           if there is one
///     vault.header (host's conflicted copy 2026-12-04)             Dropbox, also "vault (…).header"
///     index/journal (conflicted copy 2026-12-04 101010)            Nextcloud, ownCloud
///     index/journal_conflict-20261204-101010                       older ownCloud
///     index/journal.conflict, index/journal.conflict-2             other tools
///
/// Vaultaire never writes such a name, so a name of this shape is always a client's copy.
public struct SyncConflict: Equatable, Sendable {
    /// The vault file the copy is a version of.
    public enum Original: Equatable, Sendable {
        case header
        case snapshot
        case journal
        case lockFile
        case blob([UInt8])
        case thumbnail([UInt8])
        /// Anything else (a temporary, a directory).
        case other
    }

    /// The copy's path inside the vault directory ("index/journal.sync-conflict-…").
    public let path: String
    /// The path inside the vault directory of the file it is a copy of ("index/journal").
    public let originalPath: String
    public let original: Original

    /// The blob ID of the file whose contents or thumbnail the copy holds.
    public var blobID: [UInt8]? {
        switch original {
        case .blob(let id), .thumbnail(let id): return id
        default: return nil
        }
    }

    /// What the copy holds, in words; `file` names the vault file (as a path inside the vault) whose
    /// contents or thumbnail a blob or thumbnail copy holds, when the index has one.
    public func holds(file: String? = nil) -> String {
        switch original {
        case .header: return "a copy of the vault header, key envelopes included (\(originalPath))"
        case .snapshot: return "a copy of the index snapshot (\(originalPath))"
        case .journal: return "a copy of the index journal, holding the other machine's changes (\(originalPath))"
        case .lockFile: return "a copy of the lock file, only a process ID (\(originalPath))"
        case .blob:
            return file.map { "a copy of the contents of \($0) (\(originalPath))" }
                ?? "a copy of the contents of a file this index does not name (\(originalPath))"
        case .thumbnail:
            return file.map { "a copy of the thumbnail of \($0) (\(originalPath))" }
                ?? "a copy of a thumbnail of a file this index does not name (\(originalPath))"
        case .other: return "a copy of \(originalPath)"
        }
    }

    /// Every conflict copy in the vault directory, `index/`, `blobs/`, `thumbs/` and their fan-out
    /// directories, sorted by path. Directories are listed through the vault's descriptor and no
    /// symbolic link is followed; a missing directory is skipped.
    public static func scan(_ layout: VaultLayout) throws -> [SyncConflict] {
        try scan(layout, skipping: CleanDirectories()).copies
    }

    /// What a scan found, and how many fan-out directories it listed.
    public struct Findings {
        public let copies: [SyncConflict]
        public let listedFanOut: Int
    }

    /// As `scan`, but a fan-out directory that `clean` holds to be unchanged since it was known to
    /// hold no copy is not listed.
    public static func scan(_ layout: VaultLayout, skipping clean: CleanDirectories) throws -> Findings {
        let root = try layout.directory().file("")
        var found: [SyncConflict] = []
        var listedFanOut = 0
        func look(in directory: AnchoredPath) throws -> [AnchoredPath.Entry] {
            let entries: [AnchoredPath.Entry]
            do { entries = try directory.entries() } catch let e as SystemError where e.errno == ENOENT { return [] }
            for entry in entries {
                guard let original = originalName(of: entry.name) else { continue }
                found.append(SyncConflict(directory: directory.relative, name: entry.name, original: original))
            }
            return entries
        }
        _ = try look(in: root)
        _ = try look(in: root.appending("index"))
        for top in ["blobs", "thumbs"] {
            for sub in try look(in: root.appending(top)) where sub.isDirectory && sub.name.utf8.count == 2 {
                let directory = root.appending(top + "/" + sub.name)
                if !clean.stamps.isEmpty, let status = try directory.status(),
                    clean.isUnchanged(directory.relative, status)
                {
                    continue
                }
                listedFanOut += 1
                _ = try look(in: directory)
            }
        }
        return Findings(copies: found.sorted { $0.path < $1.path }, listedFanOut: listedFanOut)
    }

    /// The directory holding the copy ("blobs/ab"), as `CleanDirectories` names it.
    public var directory: String {
        path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
    }

    init(directory: String, name: String, original: String) {
        let prefix = directory.isEmpty ? "" : directory + "/"
        path = prefix + name
        originalPath = prefix + original
        let fanOut = directory.split(separator: "/")
        switch (directory, original) {
        case ("", VaultHeader.fileName): self.original = .header
        case ("", "mount.lock"): self.original = .lockFile
        case ("index", "snapshot"): self.original = .snapshot
        case ("index", "journal"): self.original = .journal
        default:
            if fanOut.count == 2, original.utf8.count == 30, let id = [UInt8](hex: String(fanOut[1]) + original) {
                self.original = fanOut[0] == "blobs" ? .blob(id) : .thumbnail(id)
            } else {
                self.original = .other
            }
        }
    }

    // MARK: Names

    /// The name `name` is a sync client's conflict copy of, or nil when it is not one.
    public static func originalName(of name: String) -> String? {
        let bytes = Array(name.utf8)
        guard let (start, end) = syncthing(bytes) ?? parenthesised(bytes) ?? ownCloud(bytes) ?? generic(bytes),
            start > 0
        else {
            return nil
        }
        return String(decoding: bytes[..<start] + bytes[end...], as: UTF8.self)
    }

    /// `.sync-conflict-DATE-TIME-DEVICE`, up to the extension (the next dot) or the end.
    private static func syncthing(_ b: [UInt8]) -> (Int, Int)? {
        guard let start = find(".sync-conflict-", in: b) else { return nil }
        return (start, b[(start + 1)...].firstIndex(of: UInt8(ascii: ".")) ?? b.count)
    }

    /// ` (… conflicted copy …)`, a nested `(1)` included, wherever it stands.
    private static func parenthesised(_ b: [UInt8]) -> (Int, Int)? {
        guard let marker = find("conflicted copy", in: b, ignoringCase: true),
            let open = b[..<marker].lastIndex(of: UInt8(ascii: "(")), open > 0, b[open - 1] == UInt8(ascii: " ")
        else { return nil }
        var depth = 0
        for i in open..<b.count {
            if b[i] == UInt8(ascii: "(") { depth += 1 }
            if b[i] == UInt8(ascii: ")") { depth -= 1 }
            if depth == 0 { return (open - 1, i + 1) }
        }
        return nil
    }

    /// `_conflict-DATE-TIME`, up to the extension or the end.
    private static func ownCloud(_ b: [UInt8]) -> (Int, Int)? {
        guard let start = find("_conflict-", in: b) else { return nil }
        return (start, b[start...].firstIndex(of: UInt8(ascii: ".")) ?? b.count)
    }

    /// `.conflict` at the end, or `.conflict-` and anything after it.
    private static func generic(_ b: [UInt8]) -> (Int, Int)? {
        guard let start = find(".conflict", in: b) else { return nil }
        let after = start + ".conflict".utf8.count
        return after == b.count || b[after] == UInt8(ascii: "-") ? (start, b.count) : nil
    }

    private static func find(_ needle: String, in b: [UInt8], ignoringCase: Bool = false) -> Int? {
        let n = Array(needle.utf8)
        guard b.count >= n.count else { return nil }
        func lower(_ c: UInt8) -> UInt8 { ignoringCase && (65...90).contains(c) ? c + 32 : c }
        return (0...(b.count - n.count)).first { i in (0..<n.count).allSatisfy { lower(b[i + $0]) == n[$0] } }
    }
}
