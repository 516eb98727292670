import Glibc
import VaultFormat
import VaultSystem

/// fallocate(2), and lseek(2) with SEEK_DATA or SEEK_HOLE, on an open file. Holes are chunks the
/// file's record lists (authenticated with the index, so no one with the vault directory alone can
/// punch one); the blob stays sparse on the host there.
extension UnlockedVault {
    public enum Allocation: Sendable, Equatable {
        /// Mode 0 (grow the file to cover the range) or FALLOC_FL_KEEP_SIZE: host space reserved.
        case reserve(keepSize: Bool)
        /// FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: the range reads as zeros, its space freed.
        case punchHole
    }

    public func allocate(_ handle: FileHandle, _ allocation: Allocation, offset: Int, length: Int) throws {
        try requireWritable()
        guard handle.writable else { throw FSError(EBADF) }
        guard offset >= 0, length > 0, offset <= Int.max - length else { throw FSError(EINVAL) }
        let f = handle.file
        let now = nowNanoseconds()
        try retryingWhenFull {
            try f.lock.withLock {
                switch allocation {
                case .reserve(let keepSize):
                    guard keepSize || offset + length <= UnlockedVault.maximumFileSize else { throw FSError(EFBIG) }
                    let before = f.size
                    do { try f.reserve(offset..<offset + length, keepSize: keepSize) } catch let e as FormatError {
                        throw DamagedFile(inode: f.id, reason: "\(e)")
                    }
                    guard f.size != before else { return }
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
                case .punchHole:
                    try punchHole(f, offset..<offset + length, now: now)
                }
            }
        }
    }

    /// With `f`'s lock held. The hole is journaled, durably, before the host space goes: a crash in
    /// between leaves the old ciphertext where the record says zeros, never a record naming chunks
    /// that are gone.
    private func punchHole(_ f: OpenFile, _ range: Range<Int>, now: Int64) throws {
        let freed: Range<Int>
        do { freed = try f.punch(range) } catch let e as FormatError {
            throw DamagedFile(inode: f.id, reason: "\(e)")
        }
        try f.writeBack()
        let journalToSync = try meta.withLock { s -> FileDescriptor? in
            guard !s.isClosed else { throw FSError(EIO, "the vault is locked") }
            var node = try s.record(f.id)
            node.size = UInt64(f.size)
            node.holes = f.holeList
            node.contentSeals = max(node.contentSeals, f.sealBase + f.blob.seals)
            node.modificationTime = now
            node.changeTime = now
            try s.commit([.putInode(node)])
            f.modifiedSinceCommit = false
            return freed.isEmpty ? nil : try s.prepareSync()
        }
        try journalToSync?.dataSync()
        f.blob.releaseSpace(chunks: freed)
    }

    /// Where the next data (`toData`) or hole at or after `offset` begins; ENXIO at or past the end.
    /// While the file is open for writing anywhere, the kernel may hold written pages this process has
    /// not seen yet (its write-back cache, a shared mapping) — in what the record calls a hole, or past
    /// the end it knows — so no answer would be safe: EOPNOTSUPP then, which copying tools take as
    /// "read it all" (the last close writes those pages back before the file is released).
    public func seek(_ handle: FileHandle, from offset: Int, toData: Bool) throws -> Int {
        let f = handle.file
        let writers = meta.withLock { _ in f.writers }
        guard writers == 0 else { throw FSError(EOPNOTSUPP, "the file is open for writing") }
        return try f.lock.withLock {
            guard let position = f.seek(from: offset, data: toData) else { throw FSError(ENXIO) }
            return position
        }
    }
}
