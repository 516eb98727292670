import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// What an interrupted session (a crash, kill -9, a failed save) leaves, and how it is repaired: at
/// the next writable open, before anything else runs.
extension UnlockedVault {
    /// Repairs what an interrupted session left: files marked `needsCheck` get their blob cut back to the
    /// index size and their last chunk resealed final; inodes with no links left are removed. Runs from
    /// init, alone. Returns one notice per thing repaired.
    func recoverAfterCrash() throws -> [String] {
        var notices: [String] = []
        // Half-written replacements (header, snapshot, journal) from an interrupted write are dropped;
        // the files they were to replace are intact, since the rename never happened.
        let index = try layout.indexDirectory()
        let temporaries = [try layout.headerFile(), index.appending("snapshot"), index.appending("journal")]
            .map { $0.parent.appending($0.name + ".tmp") }
        for file in temporaries where try file.exists() {
            try file.remove()
            notices.append("removed \(file.name), left by an interrupted write")
        }
        var repaired = 0
        var orphans = 0
        var changes: [IndexChange] = []
        let inodes = meta.withLock { $0.index.inodes }
        let suspects = inodes.ids { kind, links, needsCheck in
            (kind != .directory && links == 0) || (needsCheck && kind == .file)
        }
        for id in suspects {
            guard var node = inodes[id] else { continue }
            if node.kind != .directory && node.linkCount == 0 {
                changes.append(.removeInode(id))
                deleteBlob(node)
                orphans += 1
                continue
            }
            guard node.needsCheck, node.kind == .file else { continue }
            do {
                if let lost = try reconcile(&node) { notices.append(lost) }
            } catch {
                notices.append("file \(id) could not be repaired after the interrupted session: \(error)")
                meta.withLock { _ = $0.unrepaired.insert(id) }
                continue
            }
            node.needsCheck = false
            changes.append(.putInode(node))
            repaired += 1
        }
        if !changes.isEmpty {
            try meta.withLock { try $0.commit(changes) }
            try syncJournal()
        }
        if repaired > 0 || orphans > 0 {
            notices.append(
                "recovered from an interrupted session: \(repaired) file(s) checked, \(orphans) unlinked inode(s) removed"
            )
        }
        return notices
    }

    /// Blobs written after the index that no record names, found by the writable open that follows a
    /// crash (the lock file named a writer that is gone): what that writer's interrupted creates and
    /// rewrites left. Left in place, the next open — the lock cleared by then — would take them for
    /// another machine's and refuse to write. Those holding no chunk are removed; the others go to
    /// lost+found/, as `verify --repair` does (a sync client may have brought one meanwhile).
    func setAsideBlobsOfTheInterruptedSession(_ newer: [BlobNewerThanIndex]) throws -> [String] {
        let named = meta.withLock { s in Set(s.index.inodes.values.map(\.blobID)) }
        let strays = newer.map(\.blobID).filter { !named.contains($0) }
        guard !strays.isEmpty else { return [] }
        let done = try removeStrayBlobs(strays)
        var notices: [String] = []
        if done.removed > 0 { notices.append("removed \(done.removed) empty blob(s) left by the interrupted session") }
        if done.setAside > 0 {
            notices.append(
                "moved \(done.setAside) blob(s) the interrupted session wrote but never recorded to lost+found/ "
                    + "(nothing deleted)")
        }
        return notices
    }

    /// Brings a file that was open for writing at the crash back to a consistent state. Within that
    /// session the blob and the record may disagree either way: chunks written after the record was last
    /// journaled, or a record (size from a metadata change) ahead of chunks still in the daemon's cache,
    /// and whole chunks written out of order leave holes until the chunks before them arrive. What
    /// survives is the longest run of authenticated chunks from the start, cut to the record's size;
    /// unsynced data beyond it is lost, never returned as something else. Returns a notice when data
    /// was lost. Disk work: call without `meta`.
    func reconcile(_ node: inout Inode) throws -> String? {
        if try FileBlob.isEmpty(file: layout.blobFile(node.blobID)) { return try recreateEmptyBlob(&node) }
        let blob: FileBlob
        let info: FileBlob.HeaderInfo
        do {
            (blob, info) = try openBlob(node, writable: true)
        } catch FormatError.damaged {
            // A new file's header is written apart from its chunks when its first write is not at the
            // start; a power cut can keep the chunks and lose the header page. With the header goes
            // the content key, so nothing of the file can be read: it comes back empty, with a notice.
            return try recreateEmptyBlob(&node, truncating: true)
        }
        if info.version != node.contentVersion { try writeHeader(blob, for: node, name: info.name) }
        let size = Int(node.size)
        let recorded = (size + blob.chunkSize - 1) / blob.chunkSize
        let holes = OpenFile.clip(node.holes, below: recorded)
        let hostLength = try blob.length()
        let plain = SecureBytes(count: blob.chunkSize)
        var slot = [UInt8](repeating: 0, count: blob.slotSize)
        var lost: String?
        var newSize = size
        try plain.withUnsafeMutableBytes { p in
            try slot.withUnsafeMutableBytes { s in
                // The lengths a stored chunk may have been sealed at: whole, or (the last) the padded
                // length of the recorded size, or whatever the blob holds of it.
                func authenticatedLength(_ index: Int) -> (length: Int, final: Bool)? {
                    var lengths = [blob.chunkSize]
                    if index == recorded - 1 { lengths.append(blob.finalChunkLength(size: size)) }
                    let available =
                        hostLength - blob.expectedLength(size: index * blob.chunkSize)
                        - FileBlob.chunkOverhead
                    if available > 0 && available < blob.chunkSize { lengths.append(available) }
                    for length in Set(lengths).sorted(by: >) {
                        for final in [false, true]
                        where (try? blob.readChunk(index, final: final, finalLength: length, into: p, scratch: s))
                            != nil
                        {
                            return (length, final)
                        }
                    }
                    return nil
                }
                var intact = 0
                var last: (length: Int, final: Bool)?
                while intact < recorded {
                    if holes.contains(where: { $0.contains(intact) }) {
                        last = nil
                    } else {
                        guard let found = authenticatedLength(intact) else { break }
                        last = found
                    }
                    intact += 1
                }
                if intact < recorded {
                    lost = "file \(node.id) lost data written after its last fsync (cut to \(intact) chunk(s))"
                    newSize = intact * blob.chunkSize
                } else if let last, recorded > 0, last.length < size - (recorded - 1) * blob.chunkSize {
                    // The last chunk on disk is from a smaller size than the record's.
                    newSize = (recorded - 1) * blob.chunkSize + last.length
                    lost = "file \(node.id) lost data written after its last fsync (cut to \(newSize) bytes)"
                }
                let count = (newSize + blob.chunkSize - 1) / blob.chunkSize
                if let last, count > 0, !holes.contains(where: { $0.contains(count - 1) }) {
                    // The new last chunk must say it is the last, at the padded length of the size.
                    let wanted = blob.finalChunkLength(size: newSize)
                    if !last.final || last.length != wanted {
                        _ = try blob.readChunk(
                            count - 1, final: last.final, finalLength: last.length, into: p, scratch: s)
                        let used = newSize - (count - 1) * blob.chunkSize
                        if used < blob.chunkSize { _ = memset(p.baseAddress! + used, 0, blob.chunkSize - used) }
                        try blob.writeChunk(
                            count - 1, final: true, finalLength: wanted, from: UnsafeRawBufferPointer(p), scratch: s)
                        node.contentSeals += 1
                    }
                }
                if try blob.length() != blob.expectedLength(size: newSize) { try blob.truncate(toSize: newSize) }
            }
        }
        node.size = UInt64(newSize)
        node.holes = OpenFile.clip(holes, below: (newSize + blob.chunkSize - 1) / blob.chunkSize)
        try blob.sync()
        return lost
    }

    /// A new file's header waits for its first write (see `makeNode`); a crash that lands after its
    /// record was journaled and before the header was written (or reached the disk) leaves an empty
    /// blob. Nothing of the file was on disk, so it comes back as an empty file with a new header.
    /// The blob's file is written in place, never removed and made again: a crash in between would
    /// leave a durable record naming no blob.
    private func recreateEmptyBlob(_ node: inout Inode, truncating: Bool = false) throws -> String? {
        let file = try layout.blobFile(node.blobID)
        if truncating { try file.open(flags: O_RDWR).truncate(to: 0) }
        let name = path(of: node.id).map { String($0.split(separator: "/").last ?? "") } ?? ""
        let blob = try FileBlob.create(
            file: file, blobID: node.blobID, inodeID: node.id, vaultID: header.vaultID,
            headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2, name: name,
            mimeType: node.mimeType, version: node.contentVersion, reusingEmptyFile: true,
            layout: Int(node.blobLayout))
        try blob.sync()
        node.holes = []
        node.contentSeals = 0
        guard node.size > 0 else { return nil }
        node.size = 0
        return "file \(node.id) lost data written after its last fsync (cut to 0 chunk(s))"
    }
}
