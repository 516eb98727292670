import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// What `verify` found.
public struct VerifyReport {
    /// Paths (inside the vault) of files whose header, chunks or thumbnail failed, with the reason.
    public var damaged: [(path: String, reason: String)] = []
    /// Harmless findings, e.g. blobs no record points at (left by an interrupted create).
    public var notices: [String] = []
    /// Blobs on disk that no record names.
    public var strayBlobs: [[UInt8]] = []
    /// Thumbnail files whose blob no record names (`removeStrayBlobs` removes them too).
    public var orphanedThumbnails: [[UInt8]] = []
    public var filesChecked = 0
    public var chunksChecked = 0
    public var isIntact: Bool { damaged.isEmpty }
}

extension UnlockedVault {
    /// Authenticates every file header, chunk and thumbnail, and checks each blob's length against its
    /// record (truncation and extension). Files are checked on two threads; `progress(done, total)` is
    /// called on the calling thread as they are. With `blobs`, only the files whose blob ID it accepts
    /// are checked (a restore checks each batch of files as it is laid out), and no stray blobs are
    /// looked for.
    public func verify(
        scanForStrayBlobs: Bool = true, progress: (Int, Int) -> Void = { _, _ in }, blobs: (([UInt8]) -> Bool)? = nil
    ) -> VerifyReport {
        reaper.drain()  // deleted files' blobs are gone before the scan for strays
        let scanForStrayBlobs = scanForStrayBlobs && blobs == nil
        var report = VerifyReport()
        let (files, paths) = meta.withLock { s in
            let files = s.index.inodes.values.filter { $0.kind == .file && (blobs?($0.blobID) ?? true) }
            return (files.sorted { $0.id < $1.id }, s.pathsByInode())
        }
        let referenced = Set(files.map(\.blobID))
        let unlinked = files.filter { $0.linkCount == 0 }.count
        if unlinked > 0 {
            report.notices.append(
                "\(unlinked) file(s) with no name left by an interrupted command or a crash; "
                    + "the next writable open removes them")
        }
        for finding in check(files, paths: paths, progress: progress) {
            // No name: nothing the user can reach; its blob may never have been made.
            guard let finding else { continue }
            if let reason = finding.damage {
                report.damaged.append((finding.name, reason))
            }
            report.notices += finding.part.notices
            report.chunksChecked += finding.part.chunksChecked
            report.filesChecked += 1
        }
        if scanForStrayBlobs {
            report.orphanedThumbnails = orphanedThumbnails(referenced: referenced)
            if !report.orphanedThumbnails.isEmpty {
                report.notices.append(
                    "\(report.orphanedThumbnails.count) thumbnail(s) belong to no file: "
                        + report.orphanedThumbnails.map { "thumbs/" + $0.hex.prefix(2) + "/" + $0.hex.dropFirst(2) }
                        .joined(separator: ", ") + " ('vaultaire verify --repair' removes them)")
            }
        }
        if scanForStrayBlobs, let onDisk = try? layout.blobIDsOnDisk() {
            report.strayBlobs = onDisk.filter { !referenced.contains($0) }
            if !report.strayBlobs.isEmpty {
                report.notices.append(
                    "\(report.strayBlobs.count) blob(s) belong to no file (left by an interrupted command, or "
                        + "another machine's files whose index a sync client replaced; 'vaultaire verify --repair' "
                        + "removes the empty ones and moves those with contents to lost+found/ in the vault directory)")
            }
        }
        return report
    }

    /// What checking one file found: its damage, if any, and the chunks and notices it counted.
    private struct FileFinding {
        /// The path the report gives it.
        var name: String
        var damage: String?
        var part = VerifyReport()
    }

    /// Checks the named ones of `files` on two threads (decryption is the work), each taking the next
    /// file as it finishes one, so that one large file does not leave the other thread idle. The
    /// findings come in `files`' order (nil for a file without a name); `progress` is called on the
    /// calling thread.
    private func check(
        _ files: [Inode], paths: [UInt64: [String]], progress: (Int, Int) -> Void
    ) -> [FileFinding?] {
        let next = Guarded(0)
        let done = Guarded(0)
        func worker(reporting: Bool) -> [(Int, FileFinding?)] {
            var found: [(Int, FileFinding?)] = []
            while let i = next.withLock({ n -> Int? in
                guard n < files.count else { return nil }
                n += 1
                return n - 1
            }) {
                let node = files[i]
                var finding: FileFinding?
                if node.linkCount > 0 {
                    let name = paths[node.id]?.sorted().first ?? "(unlinked inode \(node.id))"
                    var f = FileFinding(name: name)
                    f.damage = verifyFile(node, report: &f.part, paths: { _ in name })
                    finding = f
                }
                found.append((i, finding))
                let count = done.withLock { d in
                    d += 1
                    return d
                }
                if reporting { progress(count, files.count) }
            }
            return found
        }
        // Neither worker throws; without a second thread this one checks every file.
        let (here, helper) =
            (try? SideBySide.run({ worker(reporting: true) }, { worker(reporting: false) }))
            ?? (worker(reporting: true), [])
        if !files.isEmpty { progress(files.count, files.count) }
        var findings = [FileFinding?](repeating: nil, count: files.count)
        for (i, f) in here + helper { findings[i] = f }
        return findings
    }

    /// Deals with blobs that no record names (as `verify` found them), checking again under the lock
    /// that none has been taken into use since. A blob holding no chunk (what an interrupted create
    /// leaves) is removed. A blob holding contents is moved, whole, to `lost+found/` in the vault
    /// directory, never deleted: it may be another machine's file whose index a sync client replaced
    /// (a newest-wins merge leaves no conflict copy), and only that index can name it again. Stray
    /// thumbnails are removed (they are made again from their file).
    public func removeStrayBlobs(_ ids: [[UInt8]]) throws -> (removed: Int, setAside: Int) {
        try requireWritable()
        return try meta.withLock { s in
            let used = Set(s.index.inodes.values.map(\.blobID))
            var removed = 0
            var setAside = 0
            for id in ids where !used.contains(id) {
                let blob = try layout.blobFile(id)
                if !(try blob.exists()) {
                    // A thumbnail alone (an orphan): nothing of the file is left to keep.
                    removed += 1
                } else if !UnlockedVault.holdsNoChunk(blob) {
                    let lostAndFound = try layout.directory().file("lost+found")
                    try lostAndFound.makeDirectory()
                    let destination = lostAndFound.appending(id.hex)
                    guard !(try destination.exists()) else { continue }
                    try destination.rename(from: blob)
                    try lostAndFound.sync()
                    setAside += 1
                } else {
                    try? blob.remove()
                    removed += 1
                }
                try? layout.thumbnailFile(id).remove()
            }
            return (removed, setAside)
        }
    }

    /// Whether a blob is empty or only a header of its layout (read from its public bytes): what an
    /// interrupted create leaves. Anything unreadable counts as holding contents, to be kept.
    static func holdsNoChunk(_ blob: AnchoredPath) -> Bool {
        guard let fd = try? blob.open(flags: O_RDONLY), let size = try? fd.size() else { return false }
        if size == 0 { return true }
        var head = [UInt8](repeating: 0, count: 5)
        guard let n = try? head.withUnsafeMutableBytes({ try fd.read(into: $0, at: 0) }), n == 5,
            head[4] == 1 || head[4] == 2
        else { return false }
        return size <= FileBlob.headerSize(layout: Int(head[4]))
    }

    private func verifyFile(
        _ node: Inode, report: inout VerifyReport, paths: (Inode) -> String = { "inode \($0.id)" }
    ) -> String? {
        do {
            let (blob, _) = try openBlob(node, writable: false)
            let size = Int(node.size)
            let count = (size + blob.chunkSize - 1) / blob.chunkSize
            let holes = node.holes
            if let beyond = holes.last, beyond.upperBound > count {
                return "hole list runs past the file's \(count) chunks"
            }
            let length = try blob.length()
            let expected = blob.expectedLength(size: size)
            if length < expected && !node.needsCheck { return "blob truncated: \(length) of \(expected) bytes" }
            if length > expected && !node.needsCheck { return "blob extended beyond its recorded size" }
            let plain = SecureBytes(count: blob.chunkSize)
            var slot = [UInt8](repeating: 0, count: blob.slotSize)
            let finalLength = blob.finalChunkLength(size: size)
            try plain.withUnsafeMutableBytes { p in
                try slot.withUnsafeMutableBytes { s in
                    for i in 0..<count where !holes.contains(where: { $0.contains(i) }) {
                        let last = i == count - 1
                        do {
                            try blob.readChunk(i, final: last, finalLength: finalLength, into: p, scratch: s)
                        } catch FormatError.damaged where last && node.needsCheck {
                            try blob.readChunk(i, final: false, finalLength: finalLength, into: p, scratch: s)
                        } catch let FormatError.damaged(why) where length < expected {
                            throw FormatError.damaged("blob truncated: \(why)")
                        }
                        report.chunksChecked += 1
                    }
                }
            }
            do {
                if let set = try thumbnails(node.id), set.contentVersion != nil,
                    !set.isCurrent(contentVersion: node.contentVersion, size: node.size)
                {
                    report.notices.append(
                        "stale thumbnail of \(paths(node)) (made from other contents; "
                            + "'vaultaire thumbnails --rebuild' makes it again)")
                }
            } catch let FormatError.damaged(why) {
                return "thumbnail: \(why)"
            }
            return nil
        } catch let e as SystemError where e.errno == ENOENT {
            return "blob missing"
        } catch let FormatError.damaged(why) {
            return why
        } catch {
            return "\(error)"
        }
    }
}
