import Glibc
import VaultCrypto
import VaultFormat
import VaultKeychain
import VaultSystem

/// An open, unlocked vault: the filesystem engine the mount and the command work through.
/// Its mutable state lives in `VaultState`, reachable only under `meta`; each open file has its own
/// lock. Lock order: a file's lock before `meta`, never the reverse.
// Every FUSE thread uses the vault: its mutable state is behind `meta` (and the reporter behind its own
// lock); `notices`, `syncConflicts` and `acceptedRollback` are written only while init runs.
public final class UnlockedVault: @unchecked Sendable {
    public let layout: VaultLayout
    /// The header as this open found it, or as it migrated it to the current version (set during init only).
    public private(set) var header: VaultHeader
    public let readOnly: Bool
    let keys: KeySchedule
    let meta: Guarded<VaultState>
    /// Removes deleted files' blobs off the request path.
    let reaper: BlobReaper
    private let lockFile: Guarded<VaultLock?>
    let generations: Keychain?
    /// What opening repaired or noticed, one line each (set during init only).
    public private(set) var notices: [String] = []
    /// Where the engine reports what it could not do while serving (see `onReport`).
    private let reporter = Handler<String>()
    /// Told of files whose contents may have changed (`onContentChanged`; the thumbnailer).
    let contentObserver = Handler<ContentChange>()
    /// Conflict copies a sync client left beside the vault's files, and blobs newer than the index
    /// that it does not account for (found at a read-only open, or one settling newer blobs; any
    /// other writable open refuses with `SyncConflictError`). Set during init only.
    public private(set) var syncConflicts: [SyncConflictCopy] = []
    /// Set when an older index was accepted at open: the generation this device had seen, and the one found.
    public private(set) var acceptedRollback: (seen: UInt64, found: UInt64)?
    /// Set when the header's checksum or MAC did not match (a read-only open only; a writable one
    /// refuses). Set during init only.
    public private(set) var headerDamaged = false
    /// Watches the fan-out directories for conflict copies until the lock (nil where no record is kept).
    let conflictWatch: ConflictWatch?
    /// How many fan-out directories the scan at open listed (the others were unchanged since they
    /// were last known to hold no conflict copy). Set during init only.
    public private(set) var listedFanOutDirectories = 0

    public static let maximumNameLength = 255

    init(
        layout: VaultLayout, header: VaultHeader, master: SecureBytes, readOnly: Bool, generations: Keychain?,
        acceptRollback: Bool = false, settlingNewerBlobs: Bool = false
    ) throws {
        self.layout = layout
        self.header = header
        self.readOnly = readOnly
        self.keys = try KeySchedule(master: master)
        self.generations = generations
        // Before anything is written: a header altered since its owner sealed it is refused for writing.
        if !header.isAuthentic(master: master) {
            guard readOnly else { throw FormatError.damaged(HeaderDamage.message) }
            headerDamaged = true
        }
        // fdatasync of the journal through a descriptor of its own, so the reaper needs no lock of the vault's.
        let journal = try layout.indexDirectory().appending("journal")
        reaper = BlobReaper(beforeRemoving: { (try? journal.open(flags: O_RDONLY).dataSync()) != nil })
        // Before anything is written (the lock file included): a refused open changes nothing. The
        // snapshot is decoded meanwhile (reading only), which in a large vault takes as long as the scans.
        let store = IndexStore(directory: try layout.indexDirectory(), vaultID: header.vaultID, key: keys.index)
        // Watching from before the scan, so that the lock can tell the next open what it need not list.
        let watch = ConflictWatch.start(layout: layout, vaultID: header.vaultID, master: master)
        conflictWatch = watch
        let (_, (findings, newerBlobs)) = try SideBySide.run(
            { store.preloadSnapshot() },
            {
                (
                    try SyncConflict.scan(layout, skipping: watch?.record ?? CleanDirectories()),
                    try BlobNewerThanIndex.scan(layout)
                )
            })
        let conflicts = findings.copies
        watch?.scanFound(conflicts)
        listedFanOutDirectories = findings.listedFanOut
        let inUse = (try layout.lockFile().status()?.size ?? 0) > 0
        if !readOnly && !(conflicts.isEmpty && newerBlobs.isEmpty) {
            let state = UnlockedVault.readIndexUnchanged(layout: layout, header: header, keys: keys)
            var copies = UnlockedVault.describe(
                conflicts, root: layout.root, files: state?.fileNamesByBlob() ?? [:])
            if let state, !settlingNewerBlobs {
                copies += UnlockedVault.unaccounted(
                    newerBlobs, state: state, layout: layout, header: header, keys: keys, inUse: inUse)
            }
            if !copies.isEmpty { throw SyncConflictError(copies: copies) }
        }
        let lock = readOnly ? nil : try VaultLock.acquire(try layout.lockFile(), clearingLeftover: true)
        lockFile = Guarded(lock)
        if let stale = lock?.staleNotice { notices.append(stale) }
        let (loaded, report) = try store.load(forWriting: !readOnly)
        meta = Guarded(VaultState(index: loaded, journal: store))
        notices += report.notices
        if readOnly || settlingNewerBlobs {
            syncConflicts = meta.withLock { s in
                // Naming files walks the whole tree: only for a vault that has conflict copies.
                UnlockedVault.describe(
                    conflicts, root: layout.root, files: conflicts.isEmpty ? [:] : s.fileNamesByBlob())
                    + UnlockedVault.unaccounted(
                        newerBlobs, state: s, layout: layout, header: header, keys: keys, inUse: inUse)
            }
        }
        if let seen = try generations?.generation(for: header.vaultID), seen > store.lastSeq {
            guard acceptRollback else {
                releaseLock()
                throw FormatError.rollback(seen: seen, found: store.lastSeq)
            }
            try generations?.setGeneration(store.lastSeq, for: header.vaultID)
            acceptedRollback = (seen, store.lastSeq)
        }
        if !readOnly { notices += try recoverAfterCrash() }
        if lock?.leftByThisBoot == true { notices += try setAsideBlobsOfTheInterruptedSession(newerBlobs) }
        if !readOnly && header.version < VaultHeader.formatVersion { try upgradeFormat(master: master) }
        if !readOnly { allowCompactionWhileOpen() }
    }

    /// Migrates a version-1 vault's header in place (one atomic rename; the old header stays until the
    /// new one is durable). The index was migrated already, when it was loaded for writing; a crash
    /// between the two leaves a version-1 header beside a version-2 index, which opens, and the next
    /// writable open does this step. The compaction after it changes nothing today; it keeps the
    /// vault whole should the index ever be migrated here instead (docs/FORMAT.md, "Versioning").
    /// Blobs keep their layout until they are rewritten (`vaultaire upgrade --compact`).
    private func upgradeFormat(master: SecureBytes) throws {
        var upgraded = header
        try upgraded.renameSlot(at: 0, to: migratedSlotName(upgraded.slots[0]), master: master)
        try layout.writeHeader(upgraded)
        header = upgraded
        try meta.withLock { s in try s.journal.compact(s.index) }
        notices.append(
            "upgraded the vault to format version \(VaultHeader.formatVersion) (device slots, an authenticated "
                + "header; no backup envelope beside the vault); older versions of vaultaire cannot open it now")
    }

    /// A version-1 header's one envelope becomes the slot of the device whose salt it names: this
    /// machine's name when that is this machine's salt, else a name made of its salt ID.
    private func migratedSlotName(_ slot: VaultHeader.DeviceSlot) -> String {
        if let salt = try? generations?.deviceSalt(create: false),
            let id = try? VaultHeader.saltID(of: salt), id == slot.saltID
        {
            return FileSystem.hostName
        }
        return "device \(slot.saltID.hex)"
    }

    func releaseLock() { lockFile.withLock { $0 = nil } }

    /// Names this process in `mount.lock` again: the mount daemon calls it after detaching, since
    /// the PID written at open was its parent's.
    public func recordLockHolder() throws { try lockFile.withLock { try $0?.recordHolder() } }

    /// Sends what the engine could not do while serving (a save that failed, data that failed
    /// authentication) to `handler`; the mount passes its log.
    public func onReport(_ handler: @escaping (String) -> Void) { reporter.set(handler) }

    func report(_ message: String) { reporter.call(message) }

    /// Whether the vault has been locked (keys wiped).
    public var isClosed: Bool { meta.withLock { $0.isClosed } }

    var chunkSizeLog2: UInt8 { header.chunkSizeLog2 }

    /// Opens a file's blob and authenticates its header against the record (inode ID and content
    /// version; the previous version too while the record is marked `needsCheck`).
    func openBlob(_ node: Inode, writable: Bool) throws -> (FileBlob, FileBlob.HeaderInfo) {
        try FileBlob.open(
            file: try layout.blobFile(node.blobID), blobID: node.blobID, inodeID: node.id, vaultID: header.vaultID,
            headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2, writable: writable,
            version: node.contentVersion, allowPreviousVersion: node.needsCheck, layout: Int(node.blobLayout))
    }

    /// Reseals a blob's header (name, MIME type, content version), keeping its content key.
    func writeHeader(_ blob: FileBlob, for node: Inode, name: String) throws {
        try blob.writeHeader(
            inodeID: node.id, vaultID: header.vaultID, headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2,
            name: name, mimeType: node.mimeType, version: node.contentVersion)
    }

    /// Whether `key` is this vault's master key (constant-time).
    public func holdsMasterKey(_ key: SecureBytes) -> Bool { keys.master.constantTimeEquals(key) }

    // MARK: A full disk

    /// Runs `body`; when the host filesystem is full, waits for the space of deleted files to come
    /// back and runs it once more. `rm` answers before the host frees a blob: the blob is queued for
    /// the reaper, or — for a file deleted while open, as a program's close is still being released —
    /// queued only at its last release. Without this the first writes after freeing space would fail.
    /// `body` must leave nothing half done when it throws. Callers hold neither `meta` nor a file's lock.
    func retryingWhenFull<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch  where UnlockedVault.isNoSpace(error) {
            // Retried even when nothing is queued now: the removal may have finished since the failure.
            // Deleted files still open get a second to be released (the kernel sends RELEASE after
            // close returns); a program that keeps one open only costs this retry that second.
            for _ in 0..<100 {
                reaper.drain()
                let releasing = meta.withLock { s in
                    s.openFiles.keys.contains { s.index.inodes[$0].map { $0.linkCount == 0 } ?? false }
                }
                guard releasing else { break }
                usleep(10_000)
            }
            reaper.drain()
            return try body()
        }
    }

    static func isNoSpace(_ error: Error) -> Bool {
        let e = FSError.errno(for: error)
        return e == ENOSPC || e == EDQUOT
    }

    // MARK: State

    func requireWritable() throws {
        guard !readOnly else { throw FSError(EROFS) }
        guard !isClosed else { throw FSError(EIO, "vault is locked") }
    }

    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name != ".", name != "..", !name.utf8.contains(UInt8(ascii: "/")) else {
            throw FSError(EINVAL, "invalid name")
        }
        guard name.utf8.count <= maximumNameLength else { throw FSError(ENAMETOOLONG) }
    }

    /// Makes everything journaled so far durable: pending writes under the lock, the fdatasync after it.
    func syncJournal() throws {
        try meta.withLock { try $0.prepareSync() }?.dataSync()
    }
}
