import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// A handle on an open file, as `open`/`create` return it.
public final class FileHandle {
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
    /// while the blob runs ahead of the index is repaired at the next open.
    public func open(_ id: UInt64, write: Bool, truncate: Bool = false, append: Bool = false) throws -> FileHandle {
        if write { try requireWritable() }
        let file: OpenFile = try meta.withLock {
            var node = try record(id)
            guard node.kind == .file else { throw FSError(node.kind == .directory ? EISDIR : EINVAL) }
            // First write this session: mark the record and bump the content version (durably), then
            // reseal the header with it — in that order, so a crash in between is tolerated and repaired.
            var reseal = false
            if write && !node.needsCheck {
                node.needsCheck = true
                node.contentVersion += 1
                try commitChanges([.putInode(node)])
                try syncIndex()
                reseal = true
            }
            if let open = openFiles[id] {
                if reseal { try writeHeader(open.blob, for: node, name: open.headerName) }
                open.handles += 1
                if write { open.writers += 1 }
                return open
            }
            let (blob, info) = try openBlob(node, writable: !readOnly)
            if reseal { try writeHeader(blob, for: node, name: info.name) }
            let open = try OpenFile(id: id, blob: blob, size: Int(node.size), tolerateLastChunkFlag: node.needsCheck, cache: lendCache())
            open.headerName = info.name
            open.handles = 1
            open.writers = write ? 1 : 0
            openFiles[id] = open
            return open
        }
        let handle = FileHandle(id: id, writable: write, append: append, file: file)
        if truncate && write {
            do { try setSize(handle.id, to: 0) } catch { release(handle); throw error }
        }
        return handle
    }

    /// Creates a regular file and opens it for writing.
    public func create(in parent: UInt64, name: String, permissions: UInt32, caller: Caller, exclusive: Bool = true) throws -> FileHandle {
        do {
            let node = try makeNode(in: parent, name: name, kind: .file, permissions: permissions, caller: caller,
                                    device: 0, symlinkTarget: [], keepOpen: true)
            let file = try meta.withLock { () throws -> OpenFile in
                guard let f = openFiles[node.id] else { throw FSError(ENOENT) }
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
                throw FSError(EIO, "file \(f.id): \(e)")
            }
        }
    }

    /// Writes at `offset` (at the end for append handles); returns the bytes written.
    public func write(_ handle: FileHandle, at offset: Int, from data: UnsafeRawBufferPointer) throws -> Int {
        guard handle.writable else { throw FSError(EBADF) }
        let f = handle.file
        let now = nowNanoseconds()
        // Large writes at a known offset seal outside the lock, so concurrent ones use every core.
        let presealed = handle.append || offset < 0 || offset > UnlockedVault.maximumFileSize ? nil
            : try f.presealWholeChunks(at: offset, from: data)
        try f.lock.withLock {
            let position = handle.append ? f.size : offset
            guard position >= 0, position + data.count <= UnlockedVault.maximumFileSize else { throw FSError(EFBIG) }
            do { try f.write(at: position, from: data, presealed: presealed) } catch let e as FormatError {
                throw FSError(EIO, "file \(f.id): \(e)")
            }
            let size = f.size
            meta.withLock {
                touchInMemory(f.id) { $0.size = UInt64(size); $0.modificationTime = now; $0.changeTime = now }
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
        try f.lock.withLock {
            if newSize < f.size {
                try f.writeBack()
                try meta.withLock {
                    var node = try record(id)
                    node.size = UInt64(newSize); node.modificationTime = now; node.changeTime = now
                    try commitChanges([.putInode(node)])
                }
                try f.truncate(to: newSize)
            } else {
                do { try f.truncate(to: newSize) } catch let e as FormatError { throw FSError(EIO, "\(e)") }
                meta.withLock {
                    touchInMemory(id) { $0.size = UInt64(newSize); $0.modificationTime = now; $0.changeTime = now }
                }
            }
        }
    }

    /// close(2) of one descriptor: data written back and its record journaled (not yet durable).
    public func flush(_ handle: FileHandle) throws {
        guard handle.writable else { return }
        try commitFile(handle.file, durable: false)
    }

    /// fsync(2): the file's data and record are durable when this returns.
    public func fsync(_ handle: FileHandle) throws {
        try commitFile(handle.file, durable: true)
    }

    /// The last close of a handle; an unlinked file's inode and blob go with its last handle.
    public func release(_ handle: FileHandle) {
        let f = handle.file
        if handle.writable { try? commitFile(f, durable: false) }
        let last: Bool = meta.withLock {
            f.handles -= 1
            if handle.writable { f.writers -= 1 }
            guard f.handles == 0 else { return false }
            openFiles[f.id] = nil
            if let node = state.inodes[f.id], node.linkCount == 0 {
                try? commitChanges([.removeInode(f.id)])
                deleteBlob(node)
            }
            return true
        }
        if last {
            // No handle reaches this file any more (a new open makes a new one): its key goes now,
            // not whenever the last reference to it is dropped.
            f.lock.withLock { f.dropCache(); f.blob.wipeKey() }
            meta.withLock { takeBackCache(f.cache) }
        }
    }

    /// A wiped one-chunk buffer for a newly opened file. Buffers are reused, because each new one costs
    /// an allocation, mlock, madvise and munlock — several system calls on every small file created.
    /// Caller holds `meta`.
    func lendCache() -> SecureBytes {
        spareCaches.popLast() ?? SecureBytes(count: 1 << Int(chunkSizeLog2))
    }

    /// Takes back a closed file's buffer, already wiped. Caller holds `meta`.
    func takeBackCache(_ cache: SecureBytes) {
        if spareCaches.count < 64 && !isClosed { spareCaches.append(cache) }
    }

    /// Writes back `f`'s cached chunk and journals its record; with `durable`, syncs the blob first,
    /// then the journal, and clears `needsCheck`.
    func commitFile(_ f: OpenFile, durable: Bool) throws {
        try f.lock.withLock {
            try f.writeBack()
            if durable { try f.blob.sync() }
            try meta.withLock {
                // A handle the kernel still held when the vault locked: nothing can be journaled now.
                guard !isClosed else { throw FSError(EIO, "the vault is locked") }
                guard var node = state.inodes[f.id] else { return }
                guard durable || dirtyInodes.contains(f.id) || f.modifiedSinceCommit || heldBackHeaders[f.id] != nil else { return }
                node.size = UInt64(f.size)
                if durable { node.needsCheck = f.writers > 0 ? node.needsCheck : false }
                try commitChanges([.putInode(node)])
                f.modifiedSinceCommit = false
                if durable { try syncIndex() }
            }
        }
    }
}
