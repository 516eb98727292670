import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Everything the vault's one lock (`UnlockedVault.meta`) guards: the decrypted index and its journal,
/// the open files, and what is not journaled yet. It is reachable only inside `meta.withLock { s in … }`,
/// so no code can read or change it without the lock.
///
/// Work under the lock is memory work plus the journal append (a write into the page cache that must
/// be ordered with the change it records) and the held-back headers that must precede it. Syncing,
/// opening and creating blobs, and decrypting happen outside (see ARCHITECTURE.md, "Locks").
struct VaultState {
    /// The decrypted index: inode records and directory entries.
    var index: IndexState
    /// The sealed journal and snapshot on disk.
    let journal: IndexStore
    var openFiles: [UInt64: OpenFile] = [:]
    /// Inodes whose in-memory record differs from the journal (sizes and times from writes).
    var dirtyInodes: Set<UInt64> = []
    /// Wiped one-chunk buffers of closed files, lent to the next files opened.
    var spareCaches: [SecureBytes] = []
    /// Blob fan-out directories known to exist (by first byte of the blob ID).
    var fanOutReady: Set<UInt8> = []
    /// New files whose create is journaled with their close and whose blob header waits for the first
    /// write (see `makeNode`); their headers are written before any other record.
    var heldBackHeaders: [UInt64: FileBlob] = [:]
    /// Files whose repair after a crash failed at open: they keep `needsCheck` at close, so the next
    /// open tries again (a transient failure must not leave a header one version behind for good).
    var unrepaired: Set<UInt64> = []
    var isClosed = false
    /// Set while a compaction runs beside the requests (`UnlockedVault.compactWhileOpen`).
    var compacting = false
    /// Starts that compaction on a thread of its own (false if none could be made); set once the open
    /// is complete, for writable opens only.
    var startCompaction: (() -> Bool)?

    init(index: IndexState, journal: IndexStore) {
        self.index = index
        self.journal = journal
    }

    // MARK: Lookups

    func record(_ id: UInt64) throws -> Inode {
        guard let inode = index.inodes[id] else { throw FSError(ENOENT) }
        return inode
    }

    func directoryEntries(_ id: UInt64) throws -> [String: UInt64] {
        guard let inode = index.inodes[id] else { throw FSError(ENOENT) }
        guard inode.kind == .directory, let entries = index.entries[id] else { throw FSError(ENOTDIR) }
        return entries
    }

    /// Every path that names each inode (hard links give several).
    func pathsByInode() -> [UInt64: [String]] {
        var paths: [UInt64: [String]] = [:]
        var stack: [(UInt64, String)] = [(Inode.rootID, "")]
        while let (dir, prefix) = stack.popLast() {
            for (name, child) in index.entries[dir] ?? [:] {
                let p = prefix + "/" + name
                paths[child, default: []].append(p)
                if index.entries[child] != nil { stack.append((child, p)) }
            }
        }
        return paths
    }

    /// Whether directory `ancestor` is `id` or lies above it.
    func isAncestor(_ ancestor: UInt64, of id: UInt64) -> Bool {
        if ancestor == id { return true }
        // Walk down from `ancestor`; vault trees are shallow compared with their width.
        var stack = [ancestor]
        while let d = stack.popLast() {
            for (_, child) in index.entries[d] ?? [:] {
                if child == id { return true }
                if index.entries[child] != nil { stack.append(child) }
            }
        }
        return false
    }

    // MARK: Changes

    /// Applies `changes` in memory and appends them to the journal as one record — or, `deferred`, with
    /// the next record written.
    mutating func commit(_ changes: [IndexChange], deferred: Bool = false) throws {
        if !deferred { try writeHeldBackHeaders() }
        try journal.append(changes, deferred: deferred)
        for c in changes {
            try index.apply(c)
            if case .putInode(let inode) = c { dirtyInodes.remove(inode.id) }
        }
        if !compacting && !isClosed && journal.wantsCompactionWhileOpen, let startCompaction {
            compacting = startCompaction()
        }
    }

    /// Journaled creates are about to be written: their blobs' headers go first, so that no record
    /// names a blob without one.
    mutating func writeHeldBackHeaders() throws {
        guard !heldBackHeaders.isEmpty else { return }
        for blob in heldBackHeaders.values { try blob.writeHeldBackHeader() }
        heldBackHeaders.removeAll()
    }

    /// Writes what waits in memory (held-back headers, deferred records) and returns the journal's
    /// descriptor; `dataSync` on it, after the lock is let go, makes everything journaled durable.
    mutating func prepareSync() throws -> FileDescriptor? {
        try writeHeldBackHeaders()
        return try journal.flushForSync()
    }

    /// Updates a record in memory only; it reaches the journal at the next commit point.
    mutating func touch(_ id: UInt64, _ update: (inout Inode) -> Void) {
        guard var inode = index.inodes[id] else { return }
        update(&inode)
        index.inodes[id] = inode
        dirtyInodes.insert(id)
    }

    /// The changes that drop entry `name` → `node` from directory `parent` (whose record the caller
    /// updates and journals, with its link count adjusted here).
    func entryRemoval(parent: inout Inode, name: String, node: Inode, now: Int64) -> [IndexChange] {
        var changes: [IndexChange] = [.unlink(parent: parent.id, name: name)]
        if node.kind == .directory {
            parent.linkCount -= 1
            changes.append(.removeInode(node.id))
        } else {
            var n = node
            n.linkCount -= 1
            n.changeTime = now
            changes.append(n.linkCount == 0 && openFiles[node.id] == nil ? .removeInode(node.id) : .putInode(n))
        }
        return changes
    }

    // MARK: Open files

    /// Registers a file just created, with its new blob, as open for writing by one handle.
    mutating func openNewFile(_ id: UInt64, blob: FileBlob, name: String) throws -> OpenFile {
        let open = try OpenFile(
            id: id, blob: blob, size: 0, tolerateLastChunkFlag: true, cache: lendCache(chunkSize: blob.chunkSize))
        open.headerName = name
        open.handles = 1
        open.writers = 1
        open.mayHaveThumbnails = false
        openFiles[id] = open
        return open
    }

    // MARK: Plaintext buffers

    /// A wiped one-chunk buffer for a newly opened file. Buffers are reused, because each new one costs
    /// an allocation, mlock, madvise and munlock — several system calls on every small file created.
    mutating func lendCache(chunkSize: Int) -> SecureBytes {
        spareCaches.popLast() ?? SecureBytes(count: chunkSize)
    }

    /// Takes back a closed file's buffer, already wiped.
    mutating func takeBackCache(_ cache: SecureBytes) {
        if spareCaches.count < 64 && !isClosed { spareCaches.append(cache) }
    }
}
