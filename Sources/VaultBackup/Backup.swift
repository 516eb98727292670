import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import VaultSystem

/// `vaultaire backup`: one new snapshot of a vault on a remote, uploading only the objects the remote
/// lacks, then pruning snapshots beyond the newest `keep` and the objects none of the kept ones needs.
public enum Backup {
    public struct Summary {
        public var snapshot: UInt64 = 0
        public var files: UInt64 = 0
        public var fileBytes: UInt64 = 0
        /// Vault files (index, blobs, thumbnails) in the snapshot, and how many of them were read: the
        /// others were unchanged since the last backup on this device.
        public var vaultFiles = 0
        public var vaultFilesRead = 0
        /// Objects (and their bytes) this run uploaded, manifest and backup header not counted.
        public var objectsUploaded = 0
        public var bytesUploaded: UInt64 = 0
        /// Objects the snapshot needs that the remote already had.
        public var objectsPresent = 0
        public var manifestBytes = 0
        public var headerUploaded = false
        public var snapshotsKept = 0
        public var snapshotsRemoved = 0
        public var objectsRemoved = 0
    }

    /// Makes a snapshot of the vault at `path` on `rclone`'s remote. The vault's writers' lock is held
    /// while its files are read (hashed, and uploaded while the rest are hashed), so a writer can
    /// neither start nor be running: `FSError(EBUSY)` while one has the vault open.
    public static func run(
        vault path: String, master: SecureBytes, backupHeader: BackupHeader, keychain: Keychain?, rclone: Rclone,
        keep: Int, status: (String) -> Void, notice: (String) -> Void
    ) throws -> Summary {
        precondition(keep >= 1)
        let layout = VaultLayout(root: FileSystem.canonicalPath(path) ?? path)
        let header = try layout.readHeader()
        let headerHash = try SHA256Stream.digest(backupHeader.bytes)
        var summary = Summary()

        status("listing \(rclone.remote)")
        let remote = try RemoteBackup(rclone: rclone, requireSnapshot: false)
        let existing = remote.contents.snapshots
        // The manifests that stay after this run: the newest keep − 1 (at least the newest, which
        // also tells whose backups these are).
        let stay = Array(existing.suffix(max(1, keep - 1)))
        try remote.fetchManifests(stay)
        var kept: [Manifest] = []
        for id in stay {
            guard try remote.preamble(id).vaultID == header.vaultID else {
                throw BackupError.otherVault(remote: rclone.remote)
            }
            kept.append(try remote.manifest(id, master: master))
        }
        let seen = try SeenSnapshots()
        let seenID = try seen.newest(vaultID: header.vaultID, remote: rclone.remote)
        if (existing.last ?? 0) < seenID {
            notice(
                "remote \(rclone.remote): its newest snapshot is \(existing.last.map(String.init) ?? "none"), older than \(seenID), which this device made or saw there"
            )
        }
        let id = max(existing.last ?? 0, seenID) + 1
        summary.snapshot = id

        let staging = try Staging(what: "backup", in: Staging.memoryBackedParent)
        var cache = try HashCache(vaultID: header.vaultID, master: master)
        var fresh: [String: HashCache.Entry] = [:]
        var started = timespec()
        clock_gettime(CLOCK_REALTIME, &started)
        let startedAt = Int64(started.tv_sec) * 1_000_000_000 + Int64(started.tv_nsec)
        var manifest = Manifest(
            vaultID: header.vaultID, id: id, headerHash: headerHash, created: 0, generation: 0,
            files: 0, fileBytes: 0, entries: [])
        try VaultAccess.withWriterLock(at: layout.root, notice: notice) {
            // The vault wipes the key it is given when it closes: it gets a copy.
            let vault = try VaultAccess.open(
                at: layout.root, master: master.slice(0..<master.count), keychain: keychain, readOnly: true)
            for n in vault.notices { notice(n) }
            (manifest.generation, manifest.files, manifest.fileBytes) = (
                vault.generation, UInt64(vault.contentSummary.files), vault.contentSummary.bytes
            )
            try vault.close()
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            manifest.created = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)

            let paths = try VaultFiles.list(layout)
            var extra: [String] = []
            if !remote.contents.keys.contains(headerHash.hex) {
                try staging.write("upload/" + BackupFormat.keyPath(headerHash), backupHeader.bytes)
                extra.append(BackupFormat.keyPath(headerHash))
                summary.headerUploaded = true
            }
            status("reading the vault: \(paths.count) files")
            let sent = try ObjectUpload.run(
                paths, under: layout.root, cache: cache, started: startedAt, present: remote.contents.objectSizes,
                extra: extra, staging: staging, rclone: rclone, status: status)
            manifest.entries = sent.entries
            fresh = sent.fresh
            summary.vaultFiles = paths.count
            summary.vaultFilesRead = sent.filesRead
            summary.objectsUploaded = sent.objectsUploaded
            summary.bytesUploaded = sent.bytesUploaded
            summary.objectsPresent = sent.objectsPresent
        }
        manifest.entries.sort { $0.path < $1.path }
        summary.files = manifest.files
        summary.fileBytes = manifest.fileBytes

        // The manifest goes last: a snapshot exists only once everything it names is there.
        let sealed = try manifest.sealed(master: master)
        summary.manifestBytes = sealed.count
        try staging.write("manifest/" + BackupFormat.snapshotPath(id), sealed)
        status("uploading the manifest of snapshot \(id)")
        try rclone.upload(
            from: staging.path + "/manifest",
            listFile: try staging.writeList("manifest.list", [BackupFormat.snapshotPath(id)]))
        try seen.record(id, vaultID: header.vaultID, remote: rclone.remote)
        // Only after the snapshot is whole: the next run trusts these hashes.
        cache.replace(with: fresh)
        do { try cache.save() } catch { notice("could not keep the hashes of this backup for the next one: \(error)") }

        try prune(
            remote: remote, kept: Array(kept.suffix(keep - 1)) + [manifest], all: existing + [id], staging: staging,
            summary: &summary, status: status)
        return summary
    }

    /// Deletes the snapshots not in `kept`, then every object and backup header no kept manifest names.
    static func prune(
        remote: RemoteBackup, kept: [Manifest], all: [UInt64], staging: Staging, summary: inout Summary,
        status: (String) -> Void
    ) throws {
        let keptIDs = Set(kept.map(\.id))
        let removedSnapshots = all.filter { !keptIDs.contains($0) }
        let needed = Set(kept.flatMap { $0.entries.map { BackupFormat.objectPath($0.hash) } })
        let neededKeys = Set(kept.map { $0.headerHash.hex })
        let garbage =
            remote.contents.objects.subtracting(needed).sorted()
            + remote.contents.keys.subtracting(neededKeys).sorted().map { BackupFormat.keysDirectory + "/" + $0 }
        summary.snapshotsKept = kept.count
        summary.snapshotsRemoved = removedSnapshots.count
        summary.objectsRemoved = remote.contents.objects.subtracting(needed).count
        // Manifests first: a crash in between leaves unreferenced objects (removed next time), never a
        // snapshot without its objects.
        if !removedSnapshots.isEmpty {
            status("removing \(removedSnapshots.count) old snapshot(s)")
            try remote.rclone.delete(
                listFile: try staging.writeList("prune-snapshots.list", removedSnapshots.map(BackupFormat.snapshotPath))
            )
        }
        if !garbage.isEmpty {
            status("removing \(garbage.count) object(s) no kept snapshot needs")
            try remote.rclone.delete(listFile: try staging.writeList("prune-objects.list", garbage))
        }
    }
}
