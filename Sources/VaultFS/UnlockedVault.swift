import Glibc
import VaultCrypto
import VaultFormat
import VaultKeychain
import VaultSystem

/// An open, unlocked vault: the filesystem engine the mount and the command work through.
/// Metadata lives in the decrypted index (guarded by `meta`); each open file has its own lock.
/// Lock order: a file's lock before `meta`, never the reverse.
public final class UnlockedVault {
    public let layout: VaultLayout
    public let header: VaultHeader
    public let readOnly: Bool
    let keys: KeySchedule
    let index: IndexStore
    let meta = Mutex()
    var state: IndexState
    var openFiles: [UInt64: OpenFile] = [:]
    /// Inodes whose in-memory record differs from the journal (sizes and times from writes).
    var dirtyInodes: Set<UInt64> = []
    /// Wiped one-chunk buffers of closed files, lent to the next files opened.
    var spareCaches: [SecureBytes] = []
    /// Removes deleted files' blobs off the request path.
    let reaper: BlobReaper
    /// Blob fan-out directories known to exist (by first byte of the blob ID).
    var fanOutReady: Set<UInt8> = []
    /// New files whose create is journaled with their close and whose blob header waits for the first
    /// write (see `makeNode`); their headers are written before any other record. Guarded by `meta`.
    var heldBackHeaders: [UInt64: FileBlob] = [:]
    private var lockFile: VaultLock?
    func releaseLock() { lockFile = nil }

    /// Names this process in `mount.lock` again: the mount daemon calls it after detaching, since
    /// the PID written at open was its parent's.
    public func recordLockHolder() throws { try lockFile?.recordHolder() }
    let generations: Keychain?
    public internal(set) var notices: [String] = []
    /// Where the engine reports what it could not do while serving (a save that failed, data that
    /// failed authentication); the mount sends it to its log. Set before serving.
    public var report: (String) -> Void = { _ in }
    public internal(set) var isClosed = false

    public static let maximumNameLength = 255

    /// Set when an older index was accepted at open: the generation this device had seen, and the one found.
    public private(set) var acceptedRollback: (seen: UInt64, found: UInt64)?

    init(layout: VaultLayout, header: VaultHeader, master: SecureBytes, readOnly: Bool, generations: Keychain?,
         acceptRollback: Bool = false) throws {
        self.layout = layout
        self.header = header
        self.readOnly = readOnly
        self.keys = try KeySchedule(master: master)
        self.generations = generations
        // fdatasync of the journal through a descriptor of its own, so the reaper needs no lock of the vault's.
        let journal = try layout.indexDirectory().appending("journal")
        reaper = BlobReaper(beforeRemoving: { (try? journal.open(flags: O_RDONLY).dataSync()) != nil })
        if !readOnly { lockFile = try VaultLock.acquire(try layout.lockFile()) }
        if let stale = lockFile?.staleNotice { notices.append(stale) }
        index = IndexStore(directory: try layout.indexDirectory(), vaultID: header.vaultID, key: keys.index)
        let (loaded, report) = try index.load(forWriting: !readOnly)
        state = loaded
        notices += report.notices
        if let seen = try generations?.generation(for: header.vaultID), seen > index.lastSeq {
            guard acceptRollback else {
                lockFile = nil
                throw FormatError.rollback(seen: seen, found: index.lastSeq)
            }
            try generations?.setGeneration(index.lastSeq, for: header.vaultID)
            acceptedRollback = (seen, index.lastSeq)
        }
        if !readOnly { try recoverAfterCrash() }
    }

    var chunkSizeLog2: UInt8 { header.chunkSizeLog2 }

    /// Opens a file's blob and authenticates its header against the record (inode ID and content
    /// version; the previous version too while the record is marked `needsCheck`).
    func openBlob(_ node: Inode, writable: Bool) throws -> (FileBlob, FileBlob.HeaderInfo) {
        try FileBlob.open(file: try layout.blobFile(node.blobID), blobID: node.blobID, inodeID: node.id, vaultID: header.vaultID,
                          headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2, writable: writable,
                          version: node.contentVersion, allowPreviousVersion: node.needsCheck)
    }

    /// Reseals a blob's header (name, MIME type, content version), keeping its content key.
    func writeHeader(_ blob: FileBlob, for node: Inode, name: String) throws {
        try blob.writeHeader(inodeID: node.id, vaultID: header.vaultID, headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2,
                             name: name, mimeType: node.mimeType, version: node.contentVersion)
    }

    // MARK: Lookups

    func record(_ id: UInt64) throws -> Inode {
        guard let inode = state.inodes[id] else { throw FSError(ENOENT) }
        return inode
    }

    func directoryEntries(_ id: UInt64) throws -> [String: UInt64] {
        guard let inode = state.inodes[id] else { throw FSError(ENOENT) }
        guard inode.kind == .directory, let entries = state.entries[id] else { throw FSError(ENOTDIR) }
        return entries
    }

    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name != ".", name != "..", !name.utf8.contains(UInt8(ascii: "/")) else { throw FSError(EINVAL, "invalid name") }
        guard name.utf8.count <= maximumNameLength else { throw FSError(ENAMETOOLONG) }
    }

    /// The inode record `id`, with the live size of an open file.
    public func attributes(_ id: UInt64) throws -> Inode {
        try meta.withLock { try record(id) }
    }

    public func lookup(_ parent: UInt64, _ name: String) throws -> Inode {
        try meta.withLock {
            guard name.utf8.count <= UnlockedVault.maximumNameLength else { throw FSError(ENAMETOOLONG) }
            guard let child = try directoryEntries(parent)[name] else { throw FSError(ENOENT) }
            return try record(child)
        }
    }

    /// Resolves an absolute path inside the vault ("/" is the root); symlinks are not followed.
    public func resolve(_ path: String) throws -> Inode {
        try meta.withLock {
            var current = try record(Inode.rootID)
            for part in path.split(separator: "/") where part != "." {
                guard let child = try directoryEntries(current.id)[String(part)] else { throw FSError(ENOENT, path) }
                current = try record(child)
            }
            return current
        }
    }

    /// Splits a path into its parent directory's inode and the last name.
    public func resolveParent(_ path: String) throws -> (UInt64, String) {
        var parts = path.split(separator: "/").map(String.init)
        guard let name = parts.popLast() else { throw FSError(EINVAL, "the root has no parent") }
        let parent = try resolve("/" + parts.joined(separator: "/"))
        guard parent.kind == .directory else { throw FSError(ENOTDIR, path) }
        return (parent.id, name)
    }

    /// Directory listing, sorted by name.
    public func list(_ id: UInt64) throws -> [(name: String, inode: Inode)] {
        try meta.withLock {
            try directoryEntries(id).sorted { $0.key < $1.key }.map { ($0.key, try record($0.value)) }
        }
    }

    public var fileCount: Int { meta.withLock { state.inodes.count } }

    /// Whether any regular file is open (the idle timeout waits for none to be).
    public var hasOpenFiles: Bool { meta.withLock { !openFiles.isEmpty } }

    /// Whether `key` is this vault's master key (constant-time).
    public func holdsMasterKey(_ key: SecureBytes) -> Bool { keys.master.constantTimeEquals(key) }

    // MARK: A full disk

    /// Runs `body`; when the host filesystem is full, waits for the blobs of deleted files still queued
    /// for removal to go (freeing their space) and runs it once more. `rm` answers before the host frees
    /// a blob, so without this the first writes after freeing space would fail. `body` must leave
    /// nothing half done when it throws. Callers hold neither `meta` nor a file's lock.
    func retryingWhenFull<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch where UnlockedVault.isNoSpace(error) {
            // Retried even when nothing is queued now: the removal may have finished since the failure.
            reaper.drain()
            return try body()
        }
    }

    static func isNoSpace(_ error: Error) -> Bool {
        let e = FSError.errno(for: error)
        return e == ENOSPC || e == EDQUOT
    }

    // MARK: Journal

    func requireWritable() throws {
        guard !readOnly else { throw FSError(EROFS) }
        guard !isClosed else { throw FSError(EIO, "vault is locked") }
    }

    /// Applies `changes` in memory and appends them to the journal as one record — or, `deferred`, with
    /// the next record written. Caller holds `meta`.
    func commitChanges(_ changes: [IndexChange], deferred: Bool = false) throws {
        if !deferred { try writeHeldBackHeaders() }
        try index.append(changes, deferred: deferred)
        for c in changes {
            try state.apply(c)
            if case let .putInode(inode) = c { dirtyInodes.remove(inode.id) }
        }
    }

    /// Journaled creates are about to be written: their blobs' headers go first, so that no record
    /// names a blob without one. Caller holds `meta`.
    func writeHeldBackHeaders() throws {
        guard !heldBackHeaders.isEmpty else { return }
        for blob in heldBackHeaders.values { try blob.writeHeldBackHeader() }
        heldBackHeaders.removeAll()
    }

    /// Makes the journal durable, deferred records included. Caller holds `meta`.
    func syncIndex() throws {
        try writeHeldBackHeaders()
        try index.sync()
    }

    /// Updates a record in memory only; it reaches the journal at the next commit point.
    func touchInMemory(_ id: UInt64, _ update: (inout Inode) -> Void) {
        guard var inode = state.inodes[id] else { return }
        update(&inode)
        state.inodes[id] = inode
        dirtyInodes.insert(id)
    }
}
