import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// A handle on an open file, as `open`/`create` return it.
public final class FileHandle: Sendable {
    public let id: UInt64
    public let writable: Bool
    public let append: Bool
    let file: OpenFile

    init(id: UInt64, writable: Bool, append: Bool, file: OpenFile) {
        self.id = id
        self.writable = writable
        self.append = append
        self.file = file
    }
}

extension UnlockedVault {
    /// Opens a regular file. Writable opens first mark the record `needsCheck` durably, so a crash
    /// while the blob runs ahead of the index is repaired at the next open. The blob is opened and its
    /// header authenticated outside `meta`; the open file is published under it.
    public func open(_ id: UInt64, write: Bool, truncate: Bool = false, append: Bool = false) throws -> FileHandle {
        if write { try requireWritable() }
        // First write this session: mark the record and bump the content version (durably), then
        // reseal the header with it — in that order, so a crash in between is tolerated and repaired.
        let (node, joined, joinedName, reseal) = try meta.withLock { s -> (Inode, OpenFile?, String, Bool) in
            var node = try s.record(id)
            guard node.kind == .file else { throw FSError(node.kind == .directory ? EISDIR : EINVAL) }
            let reseal = write && !node.needsCheck
            if reseal {
                node.needsCheck = true
                node.contentVersion += 1
                try s.commit([.putInode(node)])
            }
            guard let open = s.openFiles[id] else { return (node, nil, "", reseal) }
            open.handles += 1
            if write { open.writers += 1 }
            return (node, open, open.headerName, reseal)
        }
        let file: OpenFile
        do {
            if reseal { try syncJournal() }
            if let joined {
                if reseal { try writeHeader(joined.blob, for: node, name: joinedName) }
                file = joined
            } else {
                file = try openAndPublish(id, recorded: node, write: write, reseal: reseal)
            }
        } catch {
            meta.withLock { s in
                if let joined {
                    joined.handles -= 1
                    if write { joined.writers -= 1 }
                }
                // The record may say the new version while the header still says the old one: its mark
                // must survive close, so that the next open accepts and repairs the pair.
                if reseal { s.unrepaired.insert(id) }
            }
            throw error
        }
        let handle = FileHandle(id: id, writable: write, append: append, file: file)
        if truncate && write {
            do { try setSize(handle.id, to: 0) } catch {
                release(handle)
                throw error
            }
        }
        return handle
    }

    /// Opens the blob and publishes it. The record was read before the lock was let go; if another open
    /// has since raised the content version and resealed the header, the header no longer matches
    /// it: the record is read again and the blob opened once more, instead of a false alarm.
    private func openAndPublish(_ id: UInt64, recorded: Inode, write: Bool, reseal: Bool) throws -> OpenFile {
        var node = recorded
        while true {
            do {
                let (blob, info) = try openBlob(node, writable: !readOnly)
                if reseal { try writeHeader(blob, for: node, name: info.name) }
                return try publishOpenFile(id, blob: blob, headerName: info.name, write: write)
            } catch let error as FormatError where !reseal {
                let fresh = try meta.withLock { try $0.record(id) }
                guard fresh.contentVersion != node.contentVersion || fresh.needsCheck != node.needsCheck else {
                    throw error
                }
                node = fresh
            }
        }
    }

    /// Registers a blob opened outside the lock as the file's one open file — unless another open
    /// got there first meanwhile, whose open file is then shared and this blob dropped.
    private func publishOpenFile(_ id: UInt64, blob: FileBlob, headerName: String, write: Bool) throws -> OpenFile {
        try meta.withLock { s in
            let node = try s.record(id)  // the record as it is now (gone: ENOENT)
            if let open = s.openFiles[id] {
                open.handles += 1
                if write { open.writers += 1 }
                return open
            }
            let open = try OpenFile(
                id: id, blob: blob, size: Int(node.size), holes: node.holes, tolerateLastChunkFlag: node.needsCheck,
                cache: s.lendCache(chunkSize: 1 << Int(chunkSizeLog2)))
            open.headerName = headerName
            open.sealBase = node.contentSeals
            open.handles = 1
            open.writers = write ? 1 : 0
            s.openFiles[id] = open
            return open
        }
    }

    /// Creates a regular file and opens it for writing.
    public func create(
        in parent: UInt64, name: String, permissions: UInt32, caller: Caller, exclusive: Bool = true
    ) throws -> FileHandle {
        do {
            let node = try retryingWhenFull {
                try makeNode(
                    in: parent, name: name, kind: .file, permissions: permissions, caller: caller,
                    device: 0, symlinkTarget: [], keepOpen: true)
            }
            let file = try meta.withLock { s -> OpenFile in
                guard let f = s.openFiles[node.id] else { throw FSError(ENOENT) }
                return f
            }
            return FileHandle(id: node.id, writable: true, append: false, file: file)
        } catch let e as FSError where e.errno == EEXIST && !exclusive {
            let node = try lookup(parent, name)
            return try open(node.id, write: true, truncate: true)
        }
    }

    public func read(_ handle: FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let f = handle.file
        if let n = f.lock.withSharedLock({ f.readWholeChunksShared(at: offset, into: buffer) }) { return n }
        return try f.lock.withLock {
            do { return try f.read(at: offset, into: buffer) } catch let e as FormatError {
                throw DamagedFile(inode: f.id, reason: "\(e)")
            }
        }
    }

    /// Writes at `offset` (at the end for append handles); returns the bytes written.
    public func write(_ handle: FileHandle, at offset: Int, from data: UnsafeRawBufferPointer) throws -> Int {
        guard handle.writable else { throw FSError(EBADF) }
        let f = handle.file
        let now = nowNanoseconds()
        // Large writes at a known offset seal outside the lock, so concurrent ones use every core.
        let presealed =
            handle.append || offset < 0 || offset > UnlockedVault.maximumFileSize
            ? nil
            : try f.presealWholeChunks(at: offset, from: data)
        try retryingWhenFull {
            try f.lock.withLock {
                let position = handle.append ? f.size : offset
                guard position >= 0, position + data.count <= UnlockedVault.maximumFileSize else {
                    throw FSError(EFBIG)
                }
                do { try f.write(at: position, from: data, presealed: presealed) } catch let e as FormatError {
                    throw DamagedFile(inode: f.id, reason: "\(e)")
                }
                let size = f.size
                let holes = f.holeList
                meta.withLock { s in
                    s.touch(f.id) {
                        $0.size = UInt64(size)
                        $0.holes = holes
                        $0.modificationTime = now
                        $0.changeTime = now
                    }
                }
            }
        }
        // A streaming write (the kernel sends them 1 MiB at a time): let the disk start on it now
        // rather than all at the final fsync, so that encrypting and writing out overlap.
        if let run = presealed, run.count * f.chunkSize >= 128 * 1024 {
            f.blob.startWriteback(fromChunk: run.first, count: run.count)
        }
        return data.count
    }

    public static let maximumFileSize = 1 << 46

    /// truncate/ftruncate. A shrink is journaled before the blob is cut, so a crash never leaves the
    /// index pointing at chunks that are gone.
    public func setSize(_ id: UInt64, to newSize: Int) throws {
        try requireWritable()
        guard newSize >= 0, newSize <= UnlockedVault.maximumFileSize else { throw FSError(EINVAL) }
        let handle = try open(id, write: true)
        defer { release(handle) }
        let f = handle.file
        let now = nowNanoseconds()
        try retryingWhenFull {
            try f.lock.withLock {
                if newSize < f.size {
                    try f.writeBack()
                    let holes = OpenFile.clip(f.holeList, below: (newSize + f.chunkSize - 1) / f.chunkSize)
                    try meta.withLock { s in
                        var node = try s.record(id)
                        node.size = UInt64(newSize)
                        node.holes = holes
                        node.modificationTime = now
                        node.changeTime = now
                        try s.commit([.putInode(node)])
                    }
                    try f.truncate(to: newSize)
                } else {
                    do { try f.truncate(to: newSize) } catch let e as FormatError {
                        throw DamagedFile(inode: id, reason: "\(e)")
                    }
                    let holes = f.holeList
                    meta.withLock { s in
                        s.touch(id) {
                            $0.size = UInt64(newSize)
                            $0.holes = holes
                            $0.modificationTime = now
                            $0.changeTime = now
                        }
                    }
                }
            }
        }
    }

    /// close(2) of one descriptor: data written back and its record journaled (not yet durable).
    /// An error here is the caller's last chance to learn that its data did not reach the vault.
    public func flush(_ handle: FileHandle) throws {
        guard handle.writable else { return }
        try retryingWhenFull { try commitFile(handle.file, durable: false) }
    }

    /// fsync(2): the file's data and record are durable when this returns.
    public func fsync(_ handle: FileHandle) throws {
        try retryingWhenFull { try commitFile(handle.file, durable: true) }
    }

    /// The last close of a handle; an unlinked file's inode and blob go with its last handle.
    public func release(_ handle: FileHandle) {
        let f = handle.file
        // The last handle of a deleted file: what it holds goes with it, so nothing is saved first.
        let deletedWithIt = meta.withLock { s in
            f.handles == 1 && (s.index.inodes[f.id].map { $0.linkCount == 0 } ?? true)
        }
        if handle.writable && !deletedWithIt {
            do { try retryingWhenFull { try commitFile(f, durable: false) } } catch {
                // The writer heard of it at flush or fsync; other handles may still save it later.
                let lastHandle = meta.withLock { _ in f.handles == 1 }
                if lastHandle { discardUnsavedChanges(f, after: error) }
            }
        }
        let (last, removed, mayHaveThumbnails) = meta.withLock { s -> (Bool, Inode?, Bool) in
            f.handles -= 1
            if handle.writable { f.writers -= 1 }
            guard f.handles == 0 else { return (false, nil, true) }
            s.openFiles[f.id] = nil
            guard let node = s.index.inodes[f.id], node.linkCount == 0 else { return (true, nil, f.mayHaveThumbnails) }
            do {
                try s.commit([.removeInode(f.id)])
                return (true, node, true)
            } catch {
                // The nameless record stays; the next writable open removes it with its blob.
                report("could not remove the last of unlinked \(f.id): \(error)")
                return (true, nil, true)
            }
        }
        if let removed { reaper.remove(blobFiles(of: removed)) }
        if last {
            // No handle reaches this file any more (a new open makes a new one): its key goes now,
            // not whenever the last reference to it is dropped.
            f.lock.withLock {
                // After the last writer: its contents may be new (thumbnails follow, off this thread).
                // The first bytes go along while the cache still holds them, so that the observer
                // can tell a small file is no image without reading it back.
                if handle.writable && !deletedWithIt {
                    f.withCachedLeadingBytes(ContentChange.leadingByteLimit) { bytes in
                        contentChanged(
                            ContentChange(id: f.id, leadingBytes: bytes, mayHaveThumbnails: mayHaveThumbnails))
                    }
                }
                f.dropCache()
                f.blob.wipeKey()
            }
            meta.withLock { $0.takeBackCache(f.cache) }
        }
    }

    /// The last handle of a file closes while its changes cannot be written (the disk stays full, the
    /// host fails). Its writers were told at flush or fsync; what the file keeps is what its blob holds,
    /// so the record is brought back to the blob as after a crash, never left claiming chunks that did
    /// not arrive (which would read as damage later). The file's lock keeps its writers out meanwhile.
    func discardUnsavedChanges(_ f: OpenFile, after error: Error) {
        f.lock.withLock {
            f.dropCache()
            let (held, recorded) = meta.withLock { s in
                (s.heldBackHeaders.removeValue(forKey: f.id), s.index.inodes[f.id])
            }
            try? held?.writeHeldBackHeader()
            guard var node = recorded else { return }
            node.size = UInt64(f.size)
            node.holes = f.holeList
            let path = path(of: f.id) ?? "(inode \(f.id))"
            do {
                _ = try reconcile(&node)
                // Another open may have joined meanwhile: the open file goes on from what the blob holds.
                f.resetAfterRepair(size: Int(node.size), holes: node.holes)
                meta.withLock { s in
                    s.touch(f.id) {
                        $0.size = node.size
                        $0.holes = node.holes
                        $0.contentSeals = node.contentSeals
                        $0.contentVersion = node.contentVersion
                    }
                }
                report("could not save \(path) (\(error)); it keeps \(node.size) bytes")
            } catch let again {
                // Its mark survives close: the next open repairs it from the blob.
                meta.withLock { _ = $0.unrepaired.insert(f.id) }
                report("could not save \(path) (\(error)), nor bring it back to what is on disk (\(again))")
            }
        }
    }

    /// Writes back `f`'s cached chunk and journals its record; with `durable`, syncs the blob first,
    /// then the journal (after letting go of `meta`), and clears `needsCheck`.
    func commitFile(_ f: OpenFile, durable: Bool) throws {
        // A snapshot of the open files (fsyncdir, close) may hold one released since: nothing to do.
        guard meta.withLock({ $0.openFiles[f.id] === f }) else { return }
        try f.lock.withLock {
            try f.writeBack()
            if durable { try f.blob.sync() }
            let journalToSync = try meta.withLock { s -> FileDescriptor? in
                // A handle the kernel still held when the vault locked: nothing can be journaled now.
                guard !s.isClosed else { throw FSError(EIO, "the vault is locked") }
                guard var node = s.index.inodes[f.id] else { return nil }
                guard durable || s.dirtyInodes.contains(f.id) || f.modifiedSinceCommit || s.heldBackHeaders[f.id] != nil
                else {
                    return nil
                }
                // needsCheck stays: a writer may be between the two steps of its open (not counted in
                // `writers` yet); only close() clears the marks, when nothing else runs.
                node.size = UInt64(f.size)
                node.holes = f.holeList
                node.contentSeals = max(node.contentSeals, f.sealBase + f.blob.seals)
                try s.commit([.putInode(node)])
                f.modifiedSinceCommit = false
                return durable ? try s.prepareSync() : nil
            }
            try journalToSync?.dataSync()
        }
    }
}
