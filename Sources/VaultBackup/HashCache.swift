import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// The SHA-256 of each vault file as the last backup read it, so that a backup of a vault that
/// changed little reads only what changed (restic and git keep the same kind of cache). An entry is
/// used only while the file's device, inode, size, modification and change times are all what they
/// were; a file whose times are within `settleTime` of the run that hashed it is not kept, since a
/// later change in the same clock tick would leave its times as they were.
///
/// One file per vault: `$XDG_CACHE_HOME/vaultaire/backup-hashes/<hex of SHA-256(vault ID)>` (or under
/// `$HOME/.cache`), directory 0700, file 0600, replaced atomically. It holds what the remote holds
/// anyway (sizes and hashes of ciphertext, blob names), and an HMAC-SHA256 under a key derived from the
/// master key: a cache someone else wrote is ignored, never trusted (a wrong hash would name an object
/// whose content does not match it). Losing it only costs a full read.
///
///     magic "VLTC" | u16 version 1 | u32 count | count × entry | HMAC-SHA256 of everything before [32]
///     entry: u16 path length | path (UTF-8) | u64 device | u64 inode | u64 size | i64 mtime ns |
///            i64 ctime ns | SHA-256 [32]
struct HashCache {
    struct Stamp: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: UInt64
        var modified: Int64
        var changed: Int64

        init(_ st: stat) {
            device = UInt64(st.st_dev)
            inode = UInt64(st.st_ino)
            size = UInt64(st.st_size)
            modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
            changed = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
        }

        init(device: UInt64, inode: UInt64, size: UInt64, modified: Int64, changed: Int64) {
            (self.device, self.inode, self.size, self.modified, self.changed) = (
                device, inode, size, modified, changed
            )
        }
    }

    struct Entry {
        var stamp: Stamp
        var hash: [UInt8]
    }

    static let magic: [UInt8] = Array("VLTC".utf8)
    static let version: UInt16 = 1
    static let macLabel = "vaultaire.backup.hash-cache"
    /// Files changed less than this before a run began are hashed again next time.
    static let settleTime: Int64 = 2_000_000_000

    let path: String?
    private let macKey: SecureBytes
    private(set) var entries: [String: Entry] = [:]

    /// The cache of vault `vaultID`, loaded if it is there and authentic; empty otherwise.
    init(vaultID: [UInt8], master: SecureBytes) throws {
        macKey = try KeyDerivation.subkey(of: master, label: HashCache.macLabel)
        if let directory = HashCache.directory() {
            path = directory + "/" + (try SHA256Stream.digest(vaultID)).hex
        } else {
            path = nil
        }
        if let path, FileSystem.exists(path), let bytes = try? FileSystem.readFile(path, limit: 1 << 30) {
            entries = (try? decode(bytes)) ?? [:]
        }
    }

    static func directory() -> String? { FileSystem.cacheDirectory("backup-hashes") }

    /// The hash recorded for `path`, if the file still has the stamp it had then.
    func hash(of path: String, stamp: Stamp) -> [UInt8]? {
        guard let e = entries[path], e.stamp == stamp else { return nil }
        return e.hash
    }

    /// Whether an entry hashed in a run that began at `started` (on the same clock as file times) may
    /// be kept: its file had not changed for `settleTime` before.
    static func isSettled(_ stamp: Stamp, started: Int64) -> Bool {
        stamp.modified < started - settleTime && stamp.changed < started - settleTime
    }

    /// Replaces the cache with `fresh`.
    mutating func replace(with fresh: [String: Entry]) { entries = fresh }

    /// Writes the cache (atomically, durable); a cache that cannot be written is only a slower next run.
    func save() throws {
        guard let path, let directory = HashCache.directory() else { return }
        var w = ByteWriter(capacity: 32 + entries.count * 110)
        w.raw(HashCache.magic)
        w.u16(HashCache.version)
        w.u32(UInt32(entries.count))
        for (name, e) in entries.sorted(by: { $0.key < $1.key }) {
            let utf8 = Array(name.utf8)
            w.u16(UInt16(utf8.count))
            w.raw(utf8)
            w.u64(e.stamp.device)
            w.u64(e.stamp.inode)
            w.u64(e.stamp.size)
            w.i64(e.stamp.modified)
            w.i64(e.stamp.changed)
            w.raw(e.hash)
        }
        try AuthenticatedCacheFile.write(
            try AuthenticatedCacheFile.seal(w.bytes, key: macKey), to: path, in: directory)
    }

    private func decode(_ bytes: [UInt8]) throws -> [String: Entry] {
        let body = try AuthenticatedCacheFile.open(bytes, key: macKey, minimum: 10, what: "backup hash cache")
        var r = ByteReader(body, what: "backup hash cache")
        guard try r.raw(4) == HashCache.magic, try r.u16() == HashCache.version else {
            throw FormatError.malformed("backup hash cache version")
        }
        var out: [String: Entry] = [:]
        for _ in 0..<(try r.u32()) {
            let name = String(decoding: try r.raw(Int(try r.u16())), as: UTF8.self)
            let stamp = Stamp(
                device: try r.u64(), inode: try r.u64(), size: try r.u64(), modified: try r.i64(), changed: try r.i64())
            out[name] = Entry(stamp: stamp, hash: try r.raw(32))
        }
        guard r.isAtEnd else { throw FormatError.malformed("backup hash cache length") }
        return out
    }
}
