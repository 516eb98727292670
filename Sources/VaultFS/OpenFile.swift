import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// The data path of one open regular file, shared by all its handles: reads and writes at any offset
/// onto the chunked stream, with a one-chunk plaintext write-back cache (in wiping storage).
///
/// Invariants between operations, which make every chunk's final flag right:
/// every chunk on disk below the last is sealed non-final, and the last chunk is sealed final —
/// except the chunk held dirty in the cache, which is sealed with the right flag when written back,
/// and the chunks in `gaps`, which are not on disk yet and read as zeros. Every chunk on disk below the
/// last is stored whole; the last is stored as long as the blob's padding rule says for `size`
/// (`finalLength`), and its plaintext past `size` is zeros.
/// Callers hold `lock` (exclusively) around every method, except `readWholeChunksShared`, which
/// needs it shared.
// Shared by every handle on the file: its data-path state is behind `lock`, `handles` and `writers`
// behind the vault's `meta`.
final class OpenFile: @unchecked Sendable {
    let id: UInt64
    let blob: FileBlob
    let lock = ReadWriteLock()
    let chunkSize: Int
    var size: Int
    var handles = 0
    var writers = 0
    /// The index marks this file as possibly ahead of its record (a crash may have left the last
    /// chunk sealed non-final); only then does a read of the last chunk accept either flag.
    var tolerateLastChunkFlag: Bool
    var modifiedSinceCommit = false
    /// The name in the sealed header, kept for reseals of a layout-1 header (new content version).
    var headerName = ""
    /// The record's content seal count when the blob was opened; `blob.seals` counts on from there.
    var sealBase: UInt64 = 0
    /// False while the file is open since its creation and nothing stored thumbnails for it (behind
    /// `meta`): its last release can then skip looking for thumbnails to remove.
    var mayHaveThumbnails = true

    let cache: SecureBytes
    private var cacheIndex = -1
    private var cacheDirty = false
    /// Chunks 0..<onDisk hold valid sealed data on disk, except those in `gaps`.
    private(set) var onDisk: Int
    /// Chunks that read as zeros and are not on disk: the record's holes, what a write past the end
    /// leaves between the old end and itself, what `truncate` adds, what a punched hole frees. They
    /// reach the record as its holes (`holeList`) when the file is committed; the blob stays sparse
    /// there. Sorted, disjoint, all below `chunkCount`, never the cached chunk.
    var gaps: [Range<Int>] = []
    /// Beyond this many gaps (a pattern of small writes each further past the end), they are written
    /// as sealed zeros, so that a record's hole list stays bounded.
    let maximumGaps = Inode.maximumHoles / 2
    private var slot: [UInt8]
    /// Scratch for runs of whole chunks, read or written with one system call.
    private var runSlots: [UInt8]
    let maximumRun: Int

    /// `cache` is one chunk of wiping storage, lent by the vault (see `UnlockedVault.lendCache`).
    init(
        id: UInt64, blob: FileBlob, size: Int, holes: [Range<Int>] = [], tolerateLastChunkFlag: Bool,
        cache: SecureBytes
    ) throws {
        self.id = id
        self.blob = blob
        self.chunkSize = blob.chunkSize
        self.size = size
        self.tolerateLastChunkFlag = tolerateLastChunkFlag
        precondition(cache.count == blob.chunkSize)
        self.cache = cache
        self.onDisk = (size + blob.chunkSize - 1) / blob.chunkSize
        self.slot = [UInt8](repeating: 0, count: blob.slotSize)
        self.maximumRun = max(1, (1 << 20) / blob.chunkSize)
        self.runSlots = []
        self.gaps = OpenFile.clip(holes, below: chunkCount)
    }

    var chunkCount: Int { (size + chunkSize - 1) / chunkSize }

    /// How much of the last chunk's plaintext the blob stores (the padding rule, for `size`).
    var finalLength: Int { blob.finalChunkLength(size: size) }

    /// The gaps as a record's hole list: merged where they touch.
    var holeList: [Range<Int>] {
        var merged: [Range<Int>] = []
        for g in gaps.sorted(by: { $0.lowerBound < $1.lowerBound }) where !g.isEmpty {
            if let last = merged.last, last.upperBound >= g.lowerBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, g.upperBound)
            } else {
                merged.append(g)
            }
        }
        return merged
    }

    static func clip(_ holes: [Range<Int>], below count: Int) -> [Range<Int>] {
        holes.compactMap { h in h.lowerBound < count ? h.lowerBound..<min(h.upperBound, count) : nil }
    }

    // MARK: Chunk I/O

    private func readFromDisk(_ index: Int, into buffer: UnsafeMutableRawBufferPointer) throws {
        let last = index == chunkCount - 1
        let stored = finalLength
        try slot.withUnsafeMutableBytes { s in
            do {
                try blob.readChunk(index, final: last, finalLength: stored, into: buffer, scratch: s)
            } catch let FormatError.damaged(why) where last && tolerateLastChunkFlag {
                // A session cut short (or a failed write) can leave the last chunk sealed non-final,
                // or at the length of another size (a whole chunk, as before the file shrank).
                var opened = false
                for (final, length) in [(false, stored), (false, chunkSize), (true, chunkSize)] where !opened {
                    opened =
                        (try? blob.readChunk(index, final: final, finalLength: length, into: buffer, scratch: s)) != nil
                }
                guard opened else { throw FormatError.damaged(why) }
            }
        }
        if last {
            // Past the end the plaintext is zeros, whatever an older, longer version left there.
            let used = size - index * chunkSize
            if used < chunkSize { _ = memset(buffer.baseAddress! + used, 0, chunkSize - used) }
        }
    }

    private func writeToDisk(_ index: Int, from buffer: UnsafeRawBufferPointer) throws {
        let last = index == chunkCount - 1
        try slot.withUnsafeMutableBytes { s in
            try blob.writeChunk(index, final: last, finalLength: last ? finalLength : nil, from: buffer, scratch: s)
        }
        onDisk = max(onDisk, index + 1)
        closeGaps(index..<index + 1)
    }

    /// Whole chunks `first ..< first + count`, straight from disk into `buffer`; falls back to one chunk
    /// at a time (which knows the last-chunk tolerance) when the run fails.
    private func readRun(_ first: Int, count: Int, into buffer: UnsafeMutableRawBufferPointer) throws {
        if runSlots.count < count * blob.slotSize {
            runSlots = [UInt8](repeating: 0, count: maximumRun * blob.slotSize)
        }
        do {
            try runSlots.withUnsafeMutableBytes { s in
                try blob.readChunks(
                    from: first, count: count, finalIndex: chunkCount - 1, finalLength: finalLength, into: buffer,
                    scratch: s)
            }
        } catch is FormatError {
            for k in 0..<count {
                try readFromDisk(
                    first + k,
                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[k * chunkSize..<(k + 1) * chunkSize]))
            }
        }
    }

    func writeRun(
        _ first: Int, count: Int, from data: UnsafeRawBufferPointer, presealed: PresealedChunks? = nil
    ) throws {
        if let slots = presealed?.slots(first, count: count) {
            let last = chunkCount - 1
            if last >= first && last < first + count {
                // Sealed non-final ahead of time; the file's last chunk must say it is the last.
                let k = last - first
                try blob.sealChunks(
                    from: last, count: 1, finalIndex: last,
                    from: UnsafeRawBufferPointer(rebasing: data[k * chunkSize..<(k + 1) * chunkSize]),
                    into: UnsafeMutableRawBufferPointer(rebasing: slots[k * blob.slotSize..<(k + 1) * blob.slotSize]))
            }
            try blob.writeSealedChunks(from: first, count: count, slots: UnsafeRawBufferPointer(slots))
        } else {
            if runSlots.count < count * blob.slotSize {
                runSlots = [UInt8](repeating: 0, count: maximumRun * blob.slotSize)
            }
            try runSlots.withUnsafeMutableBytes { s in
                try blob.writeChunks(
                    from: first, count: count, finalIndex: chunkCount - 1, finalLength: finalLength, from: data,
                    scratch: s)
            }
        }
        onDisk = max(onDisk, first + count)
        closeGaps(first..<first + count)
    }

    /// Brings chunk `index` into the cache (writing back whatever was there). A chunk taken from a
    /// gap comes in dirty: the cache now owns its write.
    private func load(_ index: Int) throws {
        if cacheIndex == index { return }
        try writeBackCache()
        cacheIndex = -1
        let fromGap = inGap(index)
        try cache.withUnsafeMutableBytes { c in
            if index < onDisk && !fromGap {
                try readFromDisk(index, into: c)
            } else {
                _ = memset(c.baseAddress!, 0, c.count)
            }
        }
        cacheIndex = index
        if fromGap {
            closeGaps(index..<index + 1)
            cacheDirty = true
        }
    }

    /// Seals the dirty cached chunk to disk.
    private func writeBackCache() throws {
        guard cacheDirty, cacheIndex >= 0 else { return }
        try cache.withUnsafeBytes { try writeToDisk(cacheIndex, from: $0) }
        cacheDirty = false
    }

    /// Puts everything on disk: the dirty cached chunk, and the blob's length (a file extended past
    /// chunks it never wrote gets them as holes, sparse on the host) — before the file's record is
    /// journaled, so that the record never counts chunks the blob lacks.
    func writeBack() throws {
        try writeBackCache()
        let expected = blob.expectedLength(size: size)
        if try blob.length() != expected { try blob.setLength(expected) }
    }

    // MARK: Operations

    /// Reads up to `buffer.count` bytes at `offset`; returns the count (0 at or past the end).
    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard offset < size, buffer.count > 0 else { return 0 }
        let length = min(buffer.count, size - offset)
        var done = 0
        while done < length {
            let position = offset + done
            let index = position / chunkSize
            let within = position % chunkSize
            let take = min(chunkSize - within, length - done)
            if index != cacheIndex && inGap(index) {
                _ = memset(buffer.baseAddress! + done, 0, take)
            } else if index != cacheIndex && within == 0 && take == chunkSize && index < onDisk {
                // Whole chunks: decrypt straight into the caller's buffer, a run at a time.
                var run = 1
                while run < maximumRun && done + (run + 1) * chunkSize <= length && index + run < onDisk
                    && index + run != cacheIndex
                    && !inGap(index + run)
                { run += 1 }
                try readRun(
                    index, count: run,
                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[done..<done + run * chunkSize]))
                done += run * chunkSize
                continue
            } else {
                try load(index)
                cache.withUnsafeBytes { c in
                    _ = memcpy(buffer.baseAddress! + done, c.baseAddress! + within, take)
                }
            }
            done += take
        }
        return length
    }

    /// The read path that needs only the shared lock: whole chunks that are on disk and not in the
    /// cache, decrypted straight into `buffer` with this call's own scratch space, so that the kernel's
    /// parallel read-ahead requests decrypt on several cores. Returns nil when the request needs
    /// anything more (a partial chunk, the cache, a damaged chunk): the caller then takes the
    /// exclusive lock and reads the ordinary way.
    func readWholeChunksShared(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard offset < size, buffer.count > 0, offset % chunkSize == 0 else { return nil }
        let length = min(buffer.count, size - offset)
        guard length % chunkSize == 0 else { return nil }
        let first = offset / chunkSize
        let count = length / chunkSize
        guard first + count <= onDisk, !(cacheIndex >= first && cacheIndex < first + count),
            !overlapsGap(first..<first + count)
        else { return nil }
        let scratch = UnsafeMutableRawBufferPointer.allocate(
            byteCount: min(count, maximumRun) * blob.slotSize, alignment: 16)
        defer { scratch.deallocate() }  // ciphertext only
        var done = 0
        while done < count {
            let run = min(maximumRun, count - done)
            do {
                try blob.readChunks(
                    from: first + done, count: run, finalIndex: chunkCount - 1, finalLength: finalLength,
                    into: UnsafeMutableRawBufferPointer(rebasing: buffer[done * chunkSize..<(done + run) * chunkSize]),
                    scratch: scratch)
            } catch {
                return nil
            }
            done += run
        }
        return length
    }

    /// Seals the whole chunks inside a write of `data` at `offset` before the caller takes the lock,
    /// so that the kernel's concurrent write-back requests encrypt on several cores; `write` then only
    /// stores them (resealing the one that ends up last, which must carry the final flag). Needs no
    /// lock: sealing reads only the blob's fixed key and ID, and every seal draws a fresh nonce, so a
    /// sealed run that goes unused costs nothing but the work. Nil when there are too few chunks.
    func presealWholeChunks(at offset: Int, from data: UnsafeRawBufferPointer) throws -> PresealedChunks? {
        let first = (offset + chunkSize - 1) / chunkSize
        let end = (offset + data.count) / chunkSize
        guard end - first >= 2 else { return nil }
        let sealed = PresealedChunks(first: first, count: end - first, slotSize: blob.slotSize)
        try blob.sealChunks(
            from: first, count: sealed.count, finalIndex: -1,
            from: UnsafeRawBufferPointer(rebasing: data[first * chunkSize - offset..<end * chunkSize - offset]),
            into: sealed.all)
        return sealed
    }

    /// Writes `data` at `offset`, growing the file (gaps read as zeros).
    func write(at offset: Int, from data: UnsafeRawBufferPointer, presealed: PresealedChunks? = nil) throws {
        guard data.count > 0 else { return }
        let oldSize = size
        do {
            try writeUnchecked(at: offset, from: data, presealed: presealed)
        } catch {
            // A failed write (ENOSPC, EIO) must not leave the size claiming chunks that never reached disk.
            if size > oldSize {
                size = oldSize
                if cacheIndex >= chunkCount {
                    cacheIndex = -1
                    cacheDirty = false
                }
                closeGaps(chunkCount..<Int.max)
                if onDisk > chunkCount {
                    // Cut after the old last chunk's whole slot: it may be on disk resealed non-final
                    // and whole, and is resealed from the cache below.
                    try? blob.setLength(blob.expectedLength(size: chunkCount * chunkSize))
                    onDisk = chunkCount
                }
                // The old last chunk may have been resealed as non-final: reseal it as final.
                tolerateLastChunkFlag = true
                if chunkCount > 0, (try? load(chunkCount - 1)) != nil { cacheDirty = true }
            }
            throw error
        }
    }

    private func writeUnchecked(at offset: Int, from data: UnsafeRawBufferPointer, presealed: PresealedChunks?) throws {
        let end = offset + data.count
        if end > size { try grow(to: end, firstWrittenChunk: offset / chunkSize) }
        modifiedSinceCommit = true
        var done = 0
        while done < data.count {
            let position = offset + done
            let index = position / chunkSize
            let within = position % chunkSize
            let take = min(chunkSize - within, data.count - done)
            if within == 0 && take == chunkSize {
                var run = 1
                while run < maximumRun && done + (run + 1) * chunkSize <= data.count { run += 1 }
                if cacheIndex >= index && cacheIndex < index + run {
                    cacheIndex = -1
                    cacheDirty = false
                }
                try writeRun(
                    index, count: run, from: UnsafeRawBufferPointer(rebasing: data[done..<done + run * chunkSize]),
                    presealed: presealed)
                done += run * chunkSize
                continue
            } else {
                try load(index)
                cache.withUnsafeMutableBytes { c in
                    _ = memcpy(c.baseAddress! + within, data.baseAddress! + done, take)
                }
                cacheDirty = true
            }
            done += take
        }
    }

    /// Extends the file to `newSize`: zeroes the old last chunk's tail and marks it for resealing
    /// non-final, and leaves the whole chunks between the old end and `firstWrittenChunk` as a gap.
    private func grow(to newSize: Int, firstWrittenChunk: Int) throws {
        let oldCount = chunkCount
        if oldCount > 0 {
            let lastIndex = oldCount - 1
            let used = size - lastIndex * chunkSize
            let newCount = (newSize + chunkSize - 1) / chunkSize
            if used < chunkSize || newCount > oldCount {
                try load(lastIndex)
                cache.withUnsafeMutableBytes { c in _ = memset(c.baseAddress! + used, 0, chunkSize - used) }
                cacheDirty = true
            }
        }
        size = newSize
        if firstWrittenChunk > oldCount {
            if gaps.count >= maximumGaps { try writeGaps() }
            gaps.append(oldCount..<firstWrittenChunk)  // every other gap lies below the old end
            if cacheIndex >= oldCount && cacheIndex < firstWrittenChunk { closeGaps(cacheIndex..<cacheIndex + 1) }
        }
        modifiedSinceCommit = true
    }

    /// Sets the size. Shrinking reseals the new last chunk (tail zeroed, final) and cuts the blob.
    func truncate(to newSize: Int) throws {
        if newSize > size {
            try grow(to: newSize, firstWrittenChunk: (newSize + chunkSize - 1) / chunkSize)
            try writeBackCache()
            return
        }
        guard newSize < size else { return }
        let newCount = (newSize + chunkSize - 1) / chunkSize
        if cacheIndex >= newCount {
            cacheIndex = -1
            cacheDirty = false
        }
        closeGaps(newCount..<Int.max)
        if newCount > 0 {
            let lastIndex = newCount - 1
            try load(lastIndex)
            let used = newSize - lastIndex * chunkSize
            cache.withUnsafeMutableBytes { c in _ = memset(c.baseAddress! + used, 0, chunkSize - used) }
            cacheDirty = true
        }
        size = newSize
        try writeBackCache()
        try blob.truncate(toSize: newSize)
        onDisk = min(onDisk, newCount)
        modifiedSinceCommit = true
    }

    /// Zeroes bytes `range`, all inside one chunk (the partial chunk at either end of a punched hole).
    func zeroWithinChunk(_ range: Range<Int>) throws {
        guard !range.isEmpty else { return }
        let index = range.lowerBound / chunkSize
        precondition((range.upperBound - 1) / chunkSize == index)
        if index != cacheIndex && inGap(index) { return }  // reads as zeros already
        try load(index)
        cache.withUnsafeMutableBytes { c in
            _ = memset(c.baseAddress! + (range.lowerBound - index * chunkSize), 0, range.count)
        }
        cacheDirty = true
        modifiedSinceCommit = true
    }

    /// Forgets the cached chunk, unwritten, if it is one of `chunks` (which are becoming a gap).
    func forgetCachedChunk(in chunks: Range<Int>) {
        guard chunks.contains(cacheIndex) else { return }
        cacheIndex = -1
        cacheDirty = false
    }

    /// After the blob was repaired under this file (a save that failed): what is on disk is all there is.
    func resetAfterRepair(size newSize: Int, holes: [Range<Int>]) {
        dropCache()
        size = newSize
        onDisk = chunkCount
        gaps = OpenFile.clip(holes, below: chunkCount)
        tolerateLastChunkFlag = true
        modifiedSinceCommit = false
    }

    /// Calls `body` with the file's first `min(size, count)` bytes when the cache holds them (nil
    /// when they would have to be read from the blob). The bytes stay in the cache's wiping memory.
    func withCachedLeadingBytes<R>(_ count: Int, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        let wanted = min(size, count)
        if wanted == 0 { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        guard cacheIndex == 0 else { return body(nil) }
        return cache.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<wanted])) }
    }

    /// Drops the plaintext cache (wiped) — on release and on lock.
    func dropCache() {
        cache.wipe()
        cacheIndex = -1
        cacheDirty = false
    }
}
