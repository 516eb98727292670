import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

/// `vaultaire restore` and `vaultaire backup --verify`: a snapshot fetched, every object checked
/// against the authenticated manifest, and (for a restore) laid out as a new vault bound to this
/// device's salt.
public enum Restore {
    /// How to get the master key from a backup header, and the credential the new vault gets.
    public struct Unlocking {
        /// Opens one backup header's envelope (backup envelope with the credential, or recovery envelope
        /// with the phrase); `FormatError.wrongCredential` when it does not fit.
        public var open: (BackupHeader) throws -> SecureBytes
        /// The restored vault's credential, given the backup header that opened.
        public var newCredential: (BackupHeader) throws -> (Credential, Pattern?)
        public init(
            open: @escaping (BackupHeader) throws -> SecureBytes,
            newCredential: @escaping (BackupHeader) throws -> (Credential, Pattern?)
        ) {
            self.open = open
            self.newCredential = newCredential
        }
    }

    public struct Summary {
        public var snapshot: UInt64 = 0
        public var created: Int64 = 0
        public var files: UInt64 = 0
        public var fileBytes: UInt64 = 0
        public var objects = 0
        public var objectBytes: UInt64 = 0
        public var chunksChecked = 0
    }

    /// The snapshot to use: `requested`, else the newest; checked against what this device has seen.
    static func choose(_ remote: RemoteBackup, requested: UInt64?) throws -> UInt64 {
        guard let newest = remote.contents.snapshots.last else {
            throw BackupError.noBackup(remote: remote.remote, what: "holds no backup snapshot")
        }
        guard let id = requested else { return newest }
        guard remote.contents.snapshots.contains(id) else {
            throw BackupError.noBackup(
                remote: remote.remote,
                what:
                    "holds no snapshot \(id) (it has \(remote.contents.snapshots.map(String.init).joined(separator: ", ")))"
            )
        }
        return id
    }

    /// Unlocks snapshot `id`, authenticates its manifest and refuses a rollback.
    static func open(
        _ remote: RemoteBackup, id: UInt64, unlocking: Unlocking, acceptRollback: Bool
    ) throws -> (Manifest, SecureBytes, BackupHeader) {
        try remote.fetchManifests([id])
        let (master, header) = try remote.unlock(for: id, with: unlocking.open)
        let manifest = try remote.manifest(id, master: master)
        guard manifest.vaultID == header.vaultID else {
            throw remote.damaged("snapshot \(id) belongs to another vault than its header")
        }
        let seen = try SeenSnapshots().newest(vaultID: manifest.vaultID, remote: remote.remote)
        if id < seen && !acceptRollback { throw BackupError.rollback(remote: remote.remote, seen: seen, found: id) }
        return (manifest, master, header)
    }

    /// Checks snapshot `id` (default the newest) on the remote without restoring it.
    public static func verify(
        rclone: Rclone, snapshot requested: UInt64?, unlocking: Unlocking, acceptRollback: Bool,
        status: (String) -> Void
    ) throws -> Summary {
        let remote = try RemoteBackup(rclone: rclone, requireSnapshot: true)
        let id = try choose(remote, requested: requested)
        // Checking an older snapshot on purpose is no rollback; the newest must not be older than seen.
        let (manifest, master, _) = try open(
            remote, id: id, unlocking: unlocking, acceptRollback: acceptRollback || requested != nil)
        defer { master.wipe() }
        let scratch = try Staging(what: "verify")
        var summary = Summary(
            snapshot: id, created: manifest.created, files: manifest.files, fileBytes: manifest.fileBytes,
            objects: manifest.entries.count)
        // Each batch is removed once checked: the scratch directory holds a batch or two, not the snapshot.
        summary.objectBytes = try ObjectDownload.run(
            manifest, from: remote, into: scratch.path, status: status, alongside: {},
            place: { entries in for e in entries { unlink(scratch.path + "/" + BackupFormat.objectPath(e.hash)) } }
        ).bytes
        try SeenSnapshots().record(id, vaultID: manifest.vaultID, remote: rclone.remote)
        return summary
    }

    /// Restores snapshot `id` (default the newest) into `target`, which must be absent or an empty
    /// directory, bound to this device's salt in `keychain`.
    public static func run(
        rclone: Rclone, snapshot requested: UInt64?, target: String, keychain: Keychain, unlocking: Unlocking,
        acceptRollback: Bool, status: (String) -> Void
    ) throws -> Summary {
        if FileSystem.exists(target) {
            guard FileSystem.isDirectory(target) else { throw FSError(ENOTDIR, "local \(target) is not a directory") }
            guard try FileSystem.listDirectory(target).isEmpty else {
                throw FSError(EEXIST, "local \(target) is not empty")
            }
        }
        let remote = try RemoteBackup(rclone: rclone, requireSnapshot: true)
        let id = try choose(remote, requested: requested)
        let (manifest, master, header) = try open(remote, id: id, unlocking: unlocking, acceptRollback: acceptRollback)
        defer { master.wipe() }
        // The keychain's rollback counter for this vault, if this device has had it before.
        let generation = try keychain.generation(for: manifest.vaultID)
        if let g = generation, g > manifest.generation, !acceptRollback {
            throw FormatError.rollback(seen: g, found: manifest.generation)
        }
        let (credential, pattern) = try unlocking.newCredential(header)

        let old = umask(0o077)
        defer { umask(old) }
        let made = !FileSystem.exists(target)
        let createdOutside = missingDirectories(target)
        try FileSystem.makeDirectories(target)
        // Whatever fails from here on leaves the target as it was: absent, or an empty directory.
        var finished = false
        defer {
            if !finished {
                Staging.removeTree(target)
                if !made { try? FileSystem.makeDirectory(target) }
            }
        }
        let scratch = try Staging(
            what: "restore", in: FileSystem.parent(of: FileSystem.canonicalPath(target) ?? target))
        var summary = Summary(
            snapshot: id, created: manifest.created, files: manifest.files, fileBytes: manifest.fileBytes,
            objects: manifest.entries.count)
        let layout = VaultLayout(root: target)
        let vaultDirectory = try layout.directory()
        let scratchDirectory = try DirectoryDescriptor(path: scratch.path)
        var placed: [String: AnchoredPath] = [:]  // object → where it went (an object named twice is copied)
        let deviceSalt = try keychain.deviceSalt(create: true)
        let hostName = FileSystem.hostName
        let chunks = ChunkCheck(manifest, root: layout.root, master: master)
        // Each batch of objects is moved into the vault once checked, and its files' chunks are checked
        // there, while the next downloads. The vault's directories (259 new inodes: 0.13 s on ext4 here)
        // and this device's slot (a PBKDF2 at the backup's cost) are made first, while the first batch
        // downloads.
        let (objectBytes, vaultHeader) = try ObjectDownload.run(
            manifest, from: remote, into: scratch.path, writingBack: true, status: status,
            alongside: {
                try layout.createDirectories()
                let restored = try header.vaultHeader.restored(
                    master: master, credential: credential, pattern: pattern, deviceSalt: deviceSalt,
                    name: hostName, iterations: Int(header.vaultHeader.legacyBackup?.iterations ?? 0),
                    now: Int64(time(nil)))
                chunks.header = restored
                return restored
            },
            place: { entries in
                for e in entries {
                    let object = BackupFormat.objectPath(e.hash)
                    let destination = vaultDirectory.file(e.path)
                    try destination.parent.makeDirectory()
                    if let first = placed[object] {
                        let fd = try destination.createExclusive()
                        try fd.write(try first.read(limit: Int.max), at: 0)
                        try fd.sync()
                    } else {
                        try destination.rename(from: scratchDirectory.file(object))
                        placed[object] = destination
                    }
                }
                try chunks.placed(entries)
            })
        summary.objectBytes = objectBytes

        // Syncing waits on the disk and verifying works the CPU, so the two go side by side: the files
        // not checked yet (the last batch's, and any whose blob the snapshot lacks). The header only
        // after both, as `init` writes it last: a directory without it is not (yet) a vault. (Written
        // as a temporary created O_EXCL beside it, synced, renamed.)
        status("writing the vault to disk and verifying it")
        let (_, report) = try SideBySide.run(
            { try syncRestored(manifest, in: vaultDirectory, root: layout.root, createdOutside: createdOutside) },
            { try chunks.finish() })
        try layout.writeHeader(vaultHeader)
        summary.chunksChecked = report.chunks
        if let g = generation, g > manifest.generation {
            try keychain.setGeneration(manifest.generation, for: manifest.vaultID)
        }
        try SeenSnapshots().record(id, vaultID: manifest.vaultID, remote: rclone.remote)
        finished = true
        // Every object matched the authenticated manifest, so damage found now was in the vault when it
        // was backed up: the restore stands (the other files are good), and the damage is reported.
        guard report.damaged.isEmpty else {
            throw BackupError.restoredWithDamage(
                target: target, damaged: report.damaged.count,
                first: "\(report.damaged[0].path): \(report.damaged[0].reason)")
        }
        return summary
    }

    /// How many syncs are in flight at once at the end of a restore: they wait on the disk, not the
    /// CPU, and the kernel merges the cache flushes of those in flight together.
    static let syncThreads = 16

    /// `path` and each of its missing parents, innermost first: what `makeDirectories` will create.
    static func missingDirectories(_ path: String) -> [String] {
        var missing: [String] = []
        var p = path
        while !FileSystem.lexists(p) {
            missing.append(p)
            let up = FileSystem.parent(of: p)
            if up == p { break }
            p = up
        }
        return missing
    }

    /// Makes the restored vault durable, all but its header: each restored file's data (fdatasync),
    /// and the entries of every directory it put a name in (fsync) — the vault's own, and the
    /// parents of the directories it made outside (`createdOutside`). Only these: `syncfs` would
    /// also wait for whatever else is dirty on the filesystem. The files were started on their way
    /// to disk as each was checked (`ObjectDownload.run`, `writingBack`), so little is left to write.
    static func syncRestored(
        _ manifest: Manifest, in vault: DirectoryDescriptor, root: String, createdOutside: [String]
    ) throws {
        var directories: Set<String> = ["", "index", "blobs", "thumbs"]
        for e in manifest.entries {
            var path = Substring(e.path)
            while let slash = path.lastIndex(of: "/") {
                path = path[..<slash]
                guard directories.insert(String(path)).inserted else { break }
            }
        }
        let files = manifest.entries.map(\.path)
        let inside = Array(directories)
        try WaitingThreads.forEach(files.count + inside.count, threads: syncThreads) { i in
            if i < files.count {
                try vault.file(files[i]).open(flags: O_RDONLY).dataSync()
            } else {
                try vault.file(inside[i - files.count]).sync()
            }
        }
        do {
            for made in createdOutside { try FileSystem.syncDirectory(containing: made) }
        } catch let e as SystemError where e.errno == EACCES {
            // A parent this user may write but not read cannot be opened to be synced: the whole
            // filesystem is, then.
            try FileSystem.syncFileSystem(containing: root)
        }
    }
}

/// The restored vault's chunks checked as its files are laid out (`verify`, on a read-only open
/// without the header, which is written last), rather than all after the last batch: a file is
/// checked once the index, its blob and (if the snapshot has one) its thumbnail are in place, on the
/// helper thread while the next batch downloads. Used by one thread at a time: the helper thread,
/// then the calling thread once the pipeline has ended.
private final class ChunkCheck {
    /// The restored vault's header, once made (before the first batch is placed).
    var header: VaultHeader?
    private let root: String
    private let master: SecureBytes
    private var vault: UnlockedVault?
    /// What was found so far.
    private(set) var damaged: [(path: String, reason: String)] = []
    private(set) var chunks = 0
    /// The index's files still to be placed: the vault opens once there are none.
    private var indexToCome: Set<String>
    /// Blobs whose thumbnail the snapshot holds, and the placed blobs and thumbnails waiting for each other.
    private let withThumbnail: Set<String>
    private var blobsPlaced = Set<String>()
    private var thumbnailsPlaced = Set<String>()
    /// Blob IDs ready to check, and those checked.
    private var ready: [[UInt8]] = []
    private var checked = Set<[UInt8]>()

    init(_ manifest: Manifest, root: String, master: SecureBytes) {
        self.root = root
        self.master = master
        indexToCome = Set(manifest.entries.map(\.path).filter { $0.hasPrefix("index/") })
        withThumbnail = Set(manifest.entries.compactMap { ChunkCheck.name($0.path, under: "thumbs") })
    }

    deinit { try? vault?.close() }

    /// "ab/cdef…" of "blobs/ab/cdef…" (under "blobs"), else nil.
    private static func name(_ path: String, under top: String) -> String? {
        path.hasPrefix(top + "/") ? String(path.dropFirst(top.count + 1)) : nil
    }

    /// Takes note of `entries`, just placed, and checks the files now ready.
    func placed(_ entries: [Manifest.Entry]) throws {
        for e in entries {
            indexToCome.remove(e.path)
            if let blob = ChunkCheck.name(e.path, under: "blobs") {
                if !withThumbnail.contains(blob) || thumbnailsPlaced.remove(blob) != nil {
                    markReady(blob)
                } else {
                    blobsPlaced.insert(blob)
                }
            } else if let thumbnail = ChunkCheck.name(e.path, under: "thumbs") {
                if blobsPlaced.remove(thumbnail) != nil {
                    markReady(thumbnail)
                } else {
                    thumbnailsPlaced.insert(thumbnail)
                }
            }
        }
        guard !ready.isEmpty, let vault = try openedVault() else { return }
        let these = Set(ready)
        ready = []
        take(vault.verify(scanForStrayBlobs: false, blobs: { these.contains($0) }))
        checked.formUnion(these)
    }

    /// Checks every file not checked yet, and closes the vault; what was found.
    func finish() throws -> (damaged: [(path: String, reason: String)], chunks: Int) {
        guard let vault = try openedVault(force: true) else { return (damaged, chunks) }
        take(vault.verify(scanForStrayBlobs: false, blobs: { [checked] in !checked.contains($0) }))
        self.vault = nil
        try vault.close()
        return (damaged, chunks)
    }

    private func markReady(_ name: String) {
        if let id = [UInt8](hex: name.replacingOccurrences(of: "/", with: "")) { ready.append(id) }
    }

    private func take(_ report: VerifyReport) {
        damaged += report.damaged
        chunks += report.chunksChecked
    }

    /// The vault, opened once its index is in place (or at the end, `force`, whatever is there).
    private func openedVault(force: Bool = false) throws -> UnlockedVault? {
        if let vault { return vault }
        guard indexToCome.isEmpty || force, let header else { return nil }
        let opened = try VaultAccess.open(at: root, header: header, master: master.slice(0..<master.count))
        vault = opened
        return opened
    }
}
