import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Making everything durable, and locking: persist, then wipe keys and caches.
extension UnlockedVault {
    /// A process that serves the vault for long (the mount daemon, after it has detached) calls this
    /// once: the watch for conflict copies then reads its events as they come, rather than leaving
    /// them queued in the kernel until the lock.
    public func startWatchingForConflictCopies() { conflictWatch?.startReading() }

    /// Journals every pending record change; with `durable`, syncs blobs and journal first. The syncs
    /// run outside `meta`, so requests of other processes go on meanwhile.
    public func commit(durable: Bool) throws {
        if durable { reaper.drain() }
        let files = meta.withLock { Array($0.openFiles.values) }
        for f in files { try commitFile(f, durable: false) }
        if durable { try syncBackingStore() }
        let journal = try meta.withLock { s -> FileDescriptor? in
            let pending = s.dirtyInodes.compactMap { s.index.inodes[$0] }.map { IndexChange.putInode($0) }
            if !pending.isEmpty { try s.commit(pending) }
            return durable ? try s.prepareSync() : nil
        }
        try journal?.dataSync()
    }

    /// syncfs(2) on the filesystem holding the vault: every blob write is durable after this.
    func syncBackingStore() throws {
        try FileSystem.syncFileSystem(containing: layout.root)
    }

    /// Locks the vault: persists everything, clears crash marks, compacts if due, records the index
    /// generation in the keychain, then wipes every key and plaintext cache. Idempotent.
    public func close() throws {
        guard !isClosed else { return }
        stopCompactingWhileOpen()
        reaper.drain()
        defer { wipeAndRelease() }
        guard !readOnly else {
            conflictWatch?.recordClean()
            return
        }
        let files = meta.withLock { Array($0.openFiles.values) }
        for f in files { try commitFile(f, durable: false) }
        do { try rotateExhaustedContentKeys() } catch {
            // The key keeps working well past the limit (a quarter of the budget); the next close retries.
            report("could not give a file a new content key at lock: \(error)")
        }
        try syncBackingStore()
        // Nothing else runs now (the mount has ended, or the command is done): the compaction's
        // snapshot write may hold the lock.
        let generation = try meta.withLock { s -> UInt64 in
            var changes: [IndexChange] = []
            for (id, var node) in s.index.inodes where node.needsCheck || s.dirtyInodes.contains(id) {
                // A file whose repair failed at open keeps its mark, so the next open tries again.
                if s.openFiles[id] == nil && !s.unrepaired.contains(id) { node.needsCheck = false }
                changes.append(.putInode(node))
            }
            if !changes.isEmpty { try s.commit(changes) }
            try s.prepareSync()?.dataSync()
            if s.journal.wantsCompaction { try s.journal.compact(s.index) }
            return s.journal.lastSeq
        }
        try generations?.setGeneration(generation, for: header.vaultID)
        // Last: the blobs written, thumbnails made and files removed above all change the directories.
        conflictWatch?.recordClean()
    }

    /// Drops keys and caches now (also the path taken when persisting failed). Files' locks are taken
    /// after `meta` is let go, in the documented order.
    func wipeAndRelease() {
        stopCompactingWhileOpen()  // it seals with the index key wiped below
        conflictWatch?.cancel()
        reaper.drain()
        let files = meta.withLock { s -> [OpenFile] in
            let files = Array(s.openFiles.values)
            for blob in s.heldBackHeaders.values { blob.wipeKey() }
            s.heldBackHeaders.removeAll()
            s.openFiles.removeAll()
            s.spareCaches.removeAll()
            s.journal.close()
            s.isClosed = true
            return files
        }
        // Handles the kernel still holds (a lazy unmount, a signal) keep their files alive: their
        // content keys are wiped here, not when the last handle goes.
        for f in files {
            f.lock.withLock {
                f.dropCache()
                f.blob.wipeKey()
            }
        }
        keys.wipe()
        AESGCMContext.wipeAll()
        releaseLock()
    }
}

extension UnlockedVault {
    /// Writes the index as a new snapshot in the current index version and starts an empty journal
    /// (atomically, as a compaction at close does): the migration calls it right after it rewrote
    /// `vault.header`. A crash in between leaves the new snapshot beside the old journal, whose
    /// records the snapshot already holds; the next open skips them. Writable opens only.
    public func compactIndexNow() throws {
        try requireWritable()
        stopCompactingWhileOpen()
        defer { allowCompactionWhileOpen() }
        try commit(durable: true)
        try meta.withLock { s in try s.journal.compact(s.index) }
    }

    /// The index version on disk (1 until the first writable open migrates it) and its key epoch.
    public var indexFormat: (version: Int, epoch: UInt32) {
        meta.withLock { ($0.journal.loadedVersion, $0.journal.epoch) }
    }
}
