import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

extension UnlockedVault {
    /// Journals every pending record change; with `durable`, syncs blobs and journal first.
    public func commit(durable: Bool) throws {
        if durable { reaper.drain() }
        let files = meta.withLock { Array(openFiles.values) }
        for f in files { try commitFile(f, durable: false) }
        try meta.withLock {
            if durable { try syncBackingStore() }
            let pending = dirtyInodes.compactMap { state.inodes[$0] }.map { IndexChange.putInode($0) }
            if !pending.isEmpty { try commitChanges(pending) }
            if durable { try syncIndex() }
        }
    }

    /// syncfs(2) on the filesystem holding the vault: every blob write is durable after this.
    func syncBackingStore() throws {
        try FileSystem.syncFileSystem(containing: layout.root)
    }

    /// Locks the vault: persists everything, clears crash marks, compacts if due, records the index
    /// generation in the keychain, then wipes every key and plaintext cache. Idempotent.
    public func close() throws {
        guard !isClosed else { return }
        reaper.drain()
        defer { wipeAndRelease() }
        guard !readOnly else { return }
        let files = meta.withLock { Array(openFiles.values) }
        for f in files { try commitFile(f, durable: false) }
        try meta.withLock {
            try syncBackingStore()
            var changes: [IndexChange] = []
            for (id, var node) in state.inodes where node.needsCheck || dirtyInodes.contains(id) {
                if openFiles[id] == nil { node.needsCheck = false }
                changes.append(.putInode(node))
            }
            if !changes.isEmpty { try commitChanges(changes) }
            try syncIndex()
            if index.wantsCompaction { try index.compact(state) }
        }
        try generations?.setGeneration(index.lastSeq, for: header.vaultID)
    }

    /// Drops keys and caches now (also the path taken when persisting failed).
    func wipeAndRelease() {
        reaper.drain()
        meta.withLock {
            // Handles the kernel still holds (a lazy unmount, a signal) keep their files alive: their
            // content keys are wiped here, not when the last handle goes.
            for f in openFiles.values { f.lock.withLock { f.dropCache(); f.blob.wipeKey() } }
            for blob in heldBackHeaders.values { blob.wipeKey() }
            heldBackHeaders.removeAll()
            openFiles.removeAll()
            spareCaches.removeAll()
            index.close()
            keys.wipe()
            AESGCMContext.wipeAll()
            isClosed = true
        }
        releaseLock()
    }

    /// The index generation (last journal sequence number).
    public var generation: UInt64 { meta.withLock { index.lastSeq } }

    // MARK: Crash recovery

    /// Repairs what an interrupted session left: files marked `needsCheck` get their blob cut back to the
    /// index size and their last chunk resealed final; inodes with no links left are removed.
    func recoverAfterCrash() throws {
        // Half-written replacements (header, snapshot, journal) from an interrupted write are dropped;
        // the files they were to replace are intact, since the rename never happened.
        let index = try layout.indexDirectory()
        for file in [try layout.headerFile(), index.appending("snapshot"), index.appending("journal")].map({ $0.parent.appending($0.name + ".tmp") })
        where try file.exists() {
            try file.remove()
            notices.append("removed \(file.name), left by an interrupted write")
        }
        var repaired = 0, orphans = 0
        var changes: [IndexChange] = []
        for (id, var node) in state.inodes {
            if node.kind != .directory && node.linkCount == 0 {
                changes.append(.removeInode(id))
                deleteBlob(node)
                orphans += 1
                continue
            }
            guard node.needsCheck, node.kind == .file else { continue }
            do {
                try reconcile(&node)
            } catch {
                notices.append("file \(id) could not be repaired after the interrupted session: \(error)")
                continue
            }
            node.needsCheck = false
            changes.append(.putInode(node))
            repaired += 1
        }
        if !changes.isEmpty {
            try commitChanges(changes)
            try syncIndex()
        }
        if repaired > 0 || orphans > 0 {
            notices.append("recovered from an interrupted session: \(repaired) file(s) checked, \(orphans) unlinked inode(s) removed")
        }
    }

    /// Brings a file that was open for writing at the crash back to a consistent state. Within that
    /// session the blob and the record may disagree either way: chunks written after the record was last
    /// journaled, or a record (size from a metadata change) ahead of chunks still in the daemon's cache,
    /// and whole chunks written out of order leave holes until the chunks before them arrive. What
    /// survives is the longest run of authenticated chunks from the start, cut to the record's size;
    /// unsynced data beyond it is lost, never returned as something else.
    private func reconcile(_ node: inout Inode) throws {
        if try FileBlob.isEmpty(file: layout.blobFile(node.blobID)) { return try recreateEmptyBlob(&node) }
        let (blob, info) = try openBlob(node, writable: true)
        if info.version != node.contentVersion { try writeHeader(blob, for: node, name: info.name) }
        let recorded = (Int(node.size) + blob.chunkSize - 1) / blob.chunkSize
        let onDisk = try blob.chunksOnDisk()
        let plain = SecureBytes(count: blob.chunkSize)
        var slot = [UInt8](repeating: 0, count: blob.slotSize)
        try plain.withUnsafeMutableBytes { p in
            try slot.withUnsafeMutableBytes { s in
                func authenticates(_ index: Int) -> Bool {
                    (try? blob.readChunk(index, final: false, into: p, scratch: s)) != nil
                        || (try? blob.readChunk(index, final: true, into: p, scratch: s)) != nil
                }
                var intact = 0
                while intact < min(recorded, onDisk) && authenticates(intact) { intact += 1 }
                if intact < recorded {
                    notices.append("file \(node.id) lost data written after its last fsync (cut to \(intact) chunk(s))")
                    node.size = UInt64(intact * blob.chunkSize)
                }
                let count = min(recorded, intact)
                if try onDisk > count || blob.trailingBytes() > 0 { try blob.truncate(toChunks: count) }
                guard count > 0 else { return }
                do {
                    try blob.readChunk(count - 1, final: true, into: p, scratch: s)
                } catch FormatError.damaged {
                    try blob.readChunk(count - 1, final: false, into: p, scratch: s)
                    try blob.writeChunk(count - 1, final: true, from: UnsafeRawBufferPointer(p), scratch: s)
                }
            }
        }
        try blob.sync()
    }

    /// A new file's header waits for its first write (see `makeNode`); a crash that lands after its
    /// record was journaled and before the header was written (or reached the disk) leaves an empty
    /// blob. Nothing of the file was on disk, so it comes back as an empty file with a new header.
    private func recreateEmptyBlob(_ node: inout Inode) throws {
        let file = try layout.blobFile(node.blobID)
        try file.remove()
        let name = pathsByInode()[node.id]?.first.map { String($0.split(separator: "/").last ?? "") } ?? ""
        let blob = try FileBlob.create(file: file, blobID: node.blobID, inodeID: node.id, vaultID: header.vaultID,
                                       headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2, name: name,
                                       mimeType: node.mimeType, version: node.contentVersion)
        try blob.sync()
        if node.size > 0 {
            notices.append("file \(node.id) lost data written after its last fsync (cut to 0 chunk(s))")
            node.size = 0
        }
    }
}
