import Glibc
import VaultCrypto
import VaultSystem

/// The vault's fan-out directories (`blobs/ab`, `thumbs/ab`) known to hold no sync client's conflict
/// copy, each with the device, inode and change time it had then. A directory whose three are still
/// the same has had no name added since, so the scan at open need not list it: in a vault of a million
/// files that listing is most of a cold mount. A copy can only arrive by a change of its directory,
/// and the change time moves with every change and cannot be set by any program.
///
/// Written when a vault is locked, for the directories a `DirectoryWatch` watched throughout the open
/// that got no conflict-shaped name, and that the scan at open found none in. A directory changed
/// within `settleTime` of the moment it is recorded is left out: a change in the same clock tick would
/// leave its change time as it was. An older record is never wrong, only less useful: a directory
/// changed since it was made is listed again.
///
/// Kept only where change times and inotify can be trusted: local filesystems (`trusts`). On a
/// network filesystem another machine's changes reach no watch.
///
/// One file per vault: `$XDG_CACHE_HOME/vaultaire/clean-directories/<hex of SHA-256(vault ID)>` (or
/// under `$HOME/.cache`), directory 0700, file 0600, replaced atomically, with an HMAC-SHA256 under a
/// key derived from the master key: a record someone else wrote is ignored (it could hide a copy).
///
///     magic "VLTD" | u16 version 1 | u32 count | count × entry | HMAC-SHA256 of everything before [32]
///     entry: u8 path length | path (UTF-8, "blobs/ab") | u64 device | u64 inode | i64 ctime ns
public struct CleanDirectories: Equatable {
    public struct Stamp: Equatable, Sendable {
        public let device: UInt64
        public let inode: UInt64
        public let changed: Int64

        public init(device: UInt64, inode: UInt64, changed: Int64) {
            self.device = device
            self.inode = inode
            self.changed = changed
        }

        public init(_ status: AnchoredPath.Status) {
            self.init(device: status.device, inode: status.inode, changed: status.changed)
        }
    }

    static let magic: [UInt8] = Array("VLTD".utf8)
    static let version: UInt16 = 1
    static let macLabel = "vaultaire.sync-scan.clean-directories"
    /// A directory changed less than this before it is recorded is listed again at the next open.
    public static let settleTime: Int64 = 2_000_000_000

    public private(set) var stamps: [String: Stamp] = [:]

    public init(_ stamps: [String: Stamp] = [:]) { self.stamps = stamps }

    /// Whether the directory at `path` ("blobs/ab") is as it was when it was known to hold no copy.
    public func isUnchanged(_ path: String, _ status: AnchoredPath.Status) -> Bool {
        stamps[path] == Stamp(status)
    }

    /// Whether a record is worth keeping for the vault at `layout`: its directory is on a local
    /// filesystem whose change times and inotify events cover every change.
    public static func trusts(_ layout: VaultLayout) -> Bool {
        guard let root = try? layout.directory(), let type = FileSystem.filesystemType(of: root) else { return false }
        let local: Set<Int64> = [
            0xEF53,  // ext2, ext3, ext4
            0x5846_5342,  // xfs
            0x9123_683E,  // btrfs
            0x0102_1994,  // tmpfs
            0xF2F5_2010,  // f2fs
            0x2FC1_2FC1,  // zfs
            0xCA45_1A4E,  // bcachefs
        ]
        return local.contains(type)
    }

    /// The key that authenticates the records of the vault with master key `master`. An open vault
    /// holds it, not the master key, until it is locked.
    public static func key(master: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.subkey(of: master, label: macLabel)
    }

    /// The record of vault `vaultID`; empty when there is none, or it does not authenticate under `key`.
    public static func load(vaultID: [UInt8], key: SecureBytes) -> CleanDirectories {
        guard let path = try? file(vaultID: vaultID), FileSystem.exists(path),
            let bytes = try? FileSystem.readFile(path, limit: 1 << 20)
        else { return CleanDirectories() }
        return (try? decode(bytes, key: key)) ?? CleanDirectories()
    }

    /// Replaces the record of vault `vaultID` with this one, authenticated under `key`.
    public func save(vaultID: [UInt8], key: SecureBytes) throws {
        guard let path = try CleanDirectories.file(vaultID: vaultID),
            let directory = FileSystem.cacheDirectory("clean-directories")
        else { return }
        var w = ByteWriter(capacity: 64 + stamps.count * 36)
        w.raw(CleanDirectories.magic)
        w.u16(CleanDirectories.version)
        w.u32(UInt32(stamps.count))
        for (path, stamp) in stamps.sorted(by: { $0.key < $1.key }) {
            let utf8 = Array(path.utf8)
            w.u8(UInt8(utf8.count))
            w.raw(utf8)
            w.u64(stamp.device)
            w.u64(stamp.inode)
            w.i64(stamp.changed)
        }
        try AuthenticatedCacheFile.write(
            try AuthenticatedCacheFile.seal(w.bytes, key: key), to: path, in: directory)
    }

    static func file(vaultID: [UInt8]) throws -> String? {
        guard let directory = FileSystem.cacheDirectory("clean-directories") else { return nil }
        return directory + "/" + (try SHA256Stream.digest(vaultID)).hex
    }

    static func decode(_ bytes: [UInt8], key: SecureBytes) throws -> CleanDirectories {
        let body = try AuthenticatedCacheFile.open(bytes, key: key, minimum: 10, what: "clean-directory record")
        var r = ByteReader(body, what: "clean-directory record")
        guard try r.raw(4) == magic, try r.u16() == version else {
            throw FormatError.malformed("clean-directory record version")
        }
        var stamps: [String: Stamp] = [:]
        for _ in 0..<(try r.u32()) {
            let path = String(decoding: try r.raw(Int(try r.u8())), as: UTF8.self)
            stamps[path] = Stamp(device: try r.u64(), inode: try r.u64(), changed: try r.i64())
        }
        guard r.isAtEnd else { throw FormatError.malformed("clean-directory record has trailing bytes") }
        return CleanDirectories(stamps)
    }
}
