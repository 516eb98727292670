import VaultCrypto
import VaultFormat

/// Constants of the backup format (docs/FORMAT.md, "Backups"): its version, labels and the names of
/// things on the remote.
///
///     REMOTE:PATH/keys/<sha256 hex>            backup headers (the key envelopes), content-addressed
///     REMOTE:PATH/snapshots/<10-digit number>  one sealed manifest per snapshot
///     REMOTE:PATH/objects/<2 hex>/<62 hex>     the vault's encrypted files, content-addressed
public enum BackupFormat {
    public static let version = 1
    public static let manifestKeyLabel = "vaultaire.backup.v1.manifest-key"
    public static let manifestLabel = "vaultaire.backup.v1.manifest"

    public static let keysDirectory = "keys"
    public static let snapshotsDirectory = "snapshots"
    public static let objectsDirectory = "objects"

    /// `objects/ab/cdef…` for the object whose SHA-256 is `hash`.
    public static func objectPath(_ hash: [UInt8]) -> String {
        let h = hash.hex
        return objectsDirectory + "/" + h.prefix(2) + "/" + h.dropFirst(2)
    }

    public static func keyPath(_ hash: [UInt8]) -> String { keysDirectory + "/" + hash.hex }

    /// Snapshot IDs are written with ten digits so that names sort in order.
    public static func snapshotName(_ id: UInt64) -> String {
        let digits = String(id)
        return String(repeating: "0", count: max(0, 10 - digits.count)) + digits
    }

    public static func snapshotPath(_ id: UInt64) -> String { snapshotsDirectory + "/" + snapshotName(id) }

    /// The key manifests are sealed under: HMAC-SHA512(master, label)[0..<32].
    public static func manifestKey(master: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.subkey(of: master, label: manifestKeyLabel)
    }
}

/// What a listing of the remote shows, parsed from its paths; anything else there is ignored.
public struct RemoteContents {
    public var objects = Set<String>()  // "objects/ab/cdef…"
    /// Each object's size as listed: an upload cut short leaves a shorter object under the right name.
    public var objectSizes: [String: UInt64] = [:]
    public var keys = Set<String>()  // 64 hex digits
    public var snapshots: [UInt64] = []  // ascending

    /// Parses `rclone lsf -R --files-only --format ps` lines: "path;size".
    public init(listing: [String]) {
        for entry in listing {
            let fields = entry.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)
            let line = String(fields[0])
            let size = fields.count > 1 ? UInt64(fields[1]) : nil
            let parts = line.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            switch (parts.first, parts.count) {
            case (BackupFormat.objectsDirectory?, 3)
            where parts[1].count == 2 && parts[2].count == 62 && RemoteContents.isHex(parts[1] + parts[2]):
                objects.insert(line)
                objectSizes[line] = size
            case (BackupFormat.keysDirectory?, 2) where parts[1].count == 64 && RemoteContents.isHex(parts[1]):
                keys.insert(parts[1])
            case (BackupFormat.snapshotsDirectory?, 2)
            where parts[1].count == 10 && parts[1].allSatisfy({ $0.isASCII && $0.isNumber }):
                if let id = UInt64(parts[1]) { snapshots.append(id) }
            default:
                continue
            }
        }
        snapshots.sort()
    }

    static func isHex(_ s: String) -> Bool { s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } }
}
