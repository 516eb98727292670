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
        try layout.createDirectories()
        let vaultDirectory = try layout.directory()
        let scratchDirectory = try DirectoryDescriptor(path: scratch.path)
        var placed: [String: AnchoredPath] = [:]  // object → where it went (an object named twice is copied)
        let deviceSalt = try keychain.deviceSalt(create: true)
        let hostName = FileSystem.hostName
        // Each batch of objects is moved into the vault once checked, while the next downloads. This
        // device's slot costs a PBKDF2 at the backup's cost: made first, while the first batch downloads.
        let (objectBytes, vaultHeader) = try ObjectDownload.run(
            manifest, from: remote, into: scratch.path, status: status,
            alongside: {
                try header.vaultHeader.restored(
                    master: master, credential: credential, pattern: pattern, deviceSalt: deviceSalt,
                    name: hostName, iterations: Int(header.vaultHeader.legacyBackup?.iterations ?? 0),
                    now: Int64(time(nil)))
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
            })
        summary.objectBytes = objectBytes

        // Syncing waits on the disk and verifying works the CPU, so the two go side by side; the
        // header only after both, as `init` writes it last: a directory without it is not (yet) a
        // vault. (Written as a temporary created O_EXCL beside it, synced, renamed.)
        status("writing the vault to disk and verifying it")
        let (_, report) = try SideBySide.run(
            { try FileSystem.syncFileSystem(containing: layout.root) },
            { () throws -> VerifyReport in
                let vault = try VaultAccess.open(
                    at: layout.root, header: vaultHeader, master: master.slice(0..<master.count))
                let report = vault.verify(scanForStrayBlobs: false)
                try vault.close()
                return report
            })
        try layout.writeHeader(vaultHeader)
        summary.chunksChecked = report.chunksChecked
        if let g = generation, g > manifest.generation {
            try keychain.setGeneration(manifest.generation, for: manifest.vaultID)
        }
        try SeenSnapshots().record(id, vaultID: manifest.vaultID, remote: rclone.remote)
        finished = true
        // Every object matched the authenticated manifest, so damage found now was in the vault when it
        // was backed up: the restore stands (the other files are good), and the damage is reported.
        guard report.isIntact else {
            throw BackupError.restoredWithDamage(
                target: target, damaged: report.damaged.count,
                first: "\(report.damaged[0].path): \(report.damaged[0].reason)")
        }
        return summary
    }
}
