import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Rewriting a file's blob whole: into layout 2 (`vaultaire upgrade --compact`), or under a new content
/// key once its seal count reached the limit. The new blob is written beside the old one and takes its
/// place in one journal record, as `put`'s replacement does: until that record the old blob is
/// untouched, and a crash before it leaves only a stray new blob (`verify --repair` removes it).
extension UnlockedVault {
    /// Rewrites every file whose blob is of layout 1 or whose content key has made `SealBudget.limit`
    /// seals, skipping files open for writing (and any that change meanwhile: they are left for the
    /// next run). `progress(done, total)` follows the files. Returns how many were rewritten.
    /// A rewritten file keeps its thumbnails, sealed again for the new blob.
    public func rewriteBlobs(progress: (Int, Int) -> Void = { _, _ in }) throws -> Int {
        try requireWritable()
        let candidates = meta.withLock { s in
            s.index.inodes.values.filter {
                $0.kind == .file && $0.linkCount > 0
                    && ($0.blobLayout < UInt8(FileBlob.layoutVersion) || $0.contentSeals >= SealBudget.limit)
            }.map(\.id).sorted()
        }
        var rewritten = 0
        for (n, id) in candidates.enumerated() {
            if try retryingWhenFull({ try rewriteBlob(id) }) { rewritten += 1 }
            progress(n + 1, candidates.count)
        }
        return rewritten
    }

    /// Gives every file whose content key has made `SealBudget.limit` seals a new key (a rewrite of its
    /// blob), leaving layout-1 blobs as they are: what every clean close of a writable open does, so a
    /// key is replaced at the latest at the lock after it reached the limit. Files still open are
    /// left for the next close.
    @discardableResult
    func rotateExhaustedContentKeys() throws -> Int {
        let due = meta.withLock { s in
            s.index.inodes.values.filter {
                $0.kind == .file && $0.linkCount > 0 && $0.contentSeals >= SealBudget.limit && s.openFiles[$0.id] == nil
            }.map(\.id).sorted()
        }
        var rotated = 0
        for id in due where try rewriteBlob(id) { rotated += 1 }
        return rotated
    }

    /// Copies file `id` into a new layout-2 blob with a new content key and switches the record to it.
    /// False when the file was open or changed meanwhile (nothing changed then).
    func rewriteBlob(_ id: UInt64) throws -> Bool {
        guard let old = meta.withLock({ s in s.openFiles[id] == nil ? s.index.inodes[id] : nil }) else {
            return false
        }
        let source = try open(id, write: false)
        var switched = false
        defer {
            if switched {
                // The record names the new blob; the old open file is no longer reachable.
                let f = source.file
                f.lock.withLock {
                    f.dropCache()
                    f.blob.wipeKey()
                }
                meta.withLock { $0.takeBackCache(f.cache) }
            } else {
                release(source)
            }
        }
        let newID = try SecureRandom.bytes(16)
        try prepareFanOut(for: newID)
        let file = try layout.blobFile(newID)
        let blob = try FileBlob.create(
            file: file, blobID: newID, inodeID: id, vaultID: header.vaultID, headerKey: keys.fileHeader,
            chunkSizeLog2: chunkSizeLog2, name: "", mimeType: old.mimeType, version: old.contentVersion)
        var holes: [Range<Int>] = []
        var thumbnail: AnchoredPath?
        do {
            let chunk = blob.chunkSize
            let size = Int(old.size)
            let count = (size + chunk - 1) / chunk
            let oldHoles = OpenFile.clip(old.holes, below: count)
            let cache = SecureBytes(count: chunk)
            let target = try OpenFile(id: id, blob: blob, size: 0, tolerateLastChunkFlag: true, cache: cache)
            defer { target.dropCache() }
            let runChunks = 256
            let buffer = SecureBytes(count: runChunks * chunk)
            defer { buffer.wipe() }
            var index = 0
            while index < count {
                if oldHoles.contains(where: { $0.contains(index) }) {
                    index += 1
                    continue
                }
                var run = 1
                while run < runChunks && index + run < count && !oldHoles.contains(where: { $0.contains(index + run) })
                {
                    run += 1
                }
                let length = min(run * chunk, size - index * chunk)
                try buffer.withUnsafeMutableBytes { b in
                    let part = UnsafeMutableRawBufferPointer(rebasing: b[0..<length])
                    let n = try read(source, at: index * chunk, into: part)
                    guard n == length else { throw FSError(EIO, "short read while rewriting inode \(id)") }
                    try target.write(at: index * chunk, from: UnsafeRawBufferPointer(part))
                }
                index += run
            }
            if target.size < size { try target.truncate(to: size) }
            try target.writeBack()
            holes = target.holeList
            try blob.sync()
            blob.wipeKeyAfterRewrite()
            thumbnail = try carryThumbnails(of: old, to: newID)
        } catch {
            try? file.remove()
            try? thumbnail?.remove()
            throw error
        }
        switched = try meta.withLock { s -> Bool in
            guard var now = s.index.inodes[id], now.blobID == old.blobID, now.contentVersion == old.contentVersion,
                now.size == old.size, let open = s.openFiles[id], open === source.file, open.handles == 1
            else { return false }
            now.blobID = newID
            now.blobLayout = UInt8(FileBlob.layoutVersion)
            now.holes = holes
            now.contentSeals = blob.seals
            now.needsCheck = false
            try s.commit([.putInode(now)])
            s.openFiles[id] = nil
            return true
        }
        guard switched else {
            try? file.remove()
            try? thumbnail?.remove()
            return false
        }
        try syncJournal()
        reapBlob(of: old)
        return true
    }
}
