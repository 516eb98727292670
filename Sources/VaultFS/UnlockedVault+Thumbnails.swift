import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Sealed thumbnails of regular files (`thumbs/XX/…`, named like the blob; docs/FORMAT.md
/// "Thumbnails"). The engine stores, opens and removes them; making them is `VaultThumbnails`' job,
/// which learns of changed files through `onContentChanged`.
extension UnlockedVault {
    /// Seals and stores a file's thumbnails (atomically replacing older ones). If the file went away
    /// meanwhile (its blob queued for removal), the new thumbnail file is removed again, so none
    /// outlives its file.
    public func setThumbnails(_ id: UInt64, _ set: ThumbnailSet) throws {
        try requireWritable()
        // Before the file exists: a writer's last release from now on must not take it for a file
        // that has none.
        meta.withLock { $0.openFiles[id]?.mayHaveThumbnails = true }
        let node = try attributes(id)
        guard node.kind == .file, !node.blobID.isEmpty else { throw FSError(EINVAL) }
        let sealed = try Thumbnail.seal(
            set, key: keys.thumbnail, vaultID: header.vaultID, inodeID: id, blobID: node.blobID)
        let file = try layout.thumbnailFile(node.blobID)
        try layout.prepareParent(of: file)
        try file.replace(with: sealed)
        let still = meta.withLock { s in s.index.inodes[id].map { $0.linkCount > 0 && $0.blobID == node.blobID } }
        if still != true { try? file.remove() }
    }

    /// A file's thumbnails, authenticated; nil when it has none. Damage throws `FormatError.damaged`.
    public func thumbnails(_ id: UInt64) throws -> ThumbnailSet? {
        let node = try attributes(id)
        guard node.kind == .file, !node.blobID.isEmpty else { return nil }
        let file = try layout.thumbnailFile(node.blobID)
        let bytes: [UInt8]
        do { bytes = try file.read(limit: Thumbnail.maximumSize + 64) } catch let e as SystemError
            where e.errno == ENOENT
        {
            return nil
        }
        return try Thumbnail.open(
            bytes, key: keys.thumbnail, vaultID: header.vaultID, inodeID: id, blobID: node.blobID)
    }

    /// Seals a file's thumbnails again for the blob that is about to replace its current one: a rewrite
    /// keeps the content, so the thumbnails stay true, and they are bound to the blob ID. Returns the new
    /// thumbnail file (the caller removes it if the switch does not happen), or nil when the file has
    /// none or its thumbnail does not authenticate (verify names that one; a rebuild makes a new one).
    func carryThumbnails(of node: Inode, to newBlobID: [UInt8]) throws -> AnchoredPath? {
        guard let bytes = try? layout.thumbnailFile(node.blobID).read(limit: Thumbnail.maximumSize + 64),
            let set = try? Thumbnail.open(
                bytes, key: keys.thumbnail, vaultID: header.vaultID, inodeID: node.id, blobID: node.blobID)
        else { return nil }
        let sealed = try Thumbnail.seal(
            set, key: keys.thumbnail, vaultID: header.vaultID, inodeID: node.id, blobID: newBlobID)
        let file = try layout.thumbnailFile(newBlobID)
        try layout.prepareParent(of: file)
        try file.replace(with: sealed)
        return file
    }

    /// Removes a file's thumbnails (none is fine).
    public func removeThumbnails(_ id: UInt64) throws {
        try requireWritable()
        let node = try attributes(id)
        guard node.kind == .file, !node.blobID.isEmpty else { return }
        let file = try layout.thumbnailFile(node.blobID)
        do { try file.remove() } catch let e as SystemError where e.errno == ENOENT {}
    }

    /// One image as both sizes (what a version 1 thumbnail file held).
    public func setThumbnail(_ id: UInt64, image: [UInt8]) throws {
        let node = try attributes(id)
        try setThumbnails(
            id, ThumbnailSet(contentVersion: node.contentVersion, fileSize: node.size, normal: image, large: image))
    }

    /// The large thumbnail, or nil.
    public func thumbnail(_ id: UInt64) throws -> [UInt8]? { try thumbnails(id)?.large }

    /// Calls `handler` when the last handle of a file that was open for writing is released (close
    /// after writing, truncate, `put`): the moment its contents may have changed for good. Runs on the
    /// releasing thread, with the file's lock held: it must only queue work, and must not keep
    /// `ContentChange.leadingBytes` past the call.
    public func onContentChanged(_ handler: @escaping @Sendable (ContentChange) -> Void) {
        contentObserver.set(handler)
    }

    func contentChanged(_ change: ContentChange) { contentObserver.call(change) }

    /// The whole contents of a regular file of at most `limit` bytes, in secure memory (wiped when
    /// released), with the record as it was when reading began. Throws EFBIG beyond `limit`.
    public func readContents(_ id: UInt64, limit: Int) throws -> (SecureBytes, Inode) {
        let node = try attributes(id)
        guard node.kind == .file else { throw FSError(EINVAL) }
        guard node.size <= UInt64(limit) else { throw FSError(EFBIG) }
        let handle = try open(id, write: false)
        defer { release(handle) }
        let contents = SecureBytes(count: Int(node.size))
        var done = 0
        try contents.withUnsafeMutableBytes { b in
            while done < b.count {
                let n = try read(handle, at: done, into: UnsafeMutableRawBufferPointer(rebasing: b[done...]))
                if n == 0 { break }
                done += n
            }
        }
        guard done == contents.count else {
            contents.wipe()
            throw FSError(EAGAIN, "file shrank while read")
        }
        return (contents, node)
    }

    /// Thumbnail files on disk that no record's blob names (left by a crash between a removal and
    /// the reaper, or copied in from elsewhere).
    func orphanedThumbnails(referenced: Set<[UInt8]>) -> [[UInt8]] {
        let top = layout.root + "/thumbs"
        guard let subs = try? FileSystem.listDirectory(top) else { return [] }
        var ids: [[UInt8]] = []
        for sub in subs where sub.count == 2 && FileSystem.isDirectory(top + "/" + sub) {
            for name in (try? FileSystem.listDirectory(top + "/" + sub)) ?? [] where name.count == 30 {
                if let id = [UInt8](hex: sub + name), !referenced.contains(id) { ids.append(id) }
            }
        }
        return ids
    }
}

/// What `onContentChanged` is told of a file whose last writer let go.
public struct ContentChange {
    /// How many leading bytes `leadingBytes` holds at most: enough for the signature of any format the
    /// thumbnailer reads.
    public static let leadingByteLimit = 64

    public let id: UInt64
    /// The file's first `min(size, leadingByteLimit)` bytes, when they were still in the open file's
    /// plaintext cache (a small file just written); nil when finding them would mean reading the file.
    /// Points into wiping memory and is valid only during the call.
    public let leadingBytes: UnsafeRawBufferPointer?
    /// False only for a file created since it was last opened: no thumbnail can exist for its blob.
    public let mayHaveThumbnails: Bool

    public init(id: UInt64, leadingBytes: UnsafeRawBufferPointer?, mayHaveThumbnails: Bool) {
        self.id = id
        self.leadingBytes = leadingBytes
        self.mayHaveThumbnails = mayHaveThumbnails
    }
}

extension UnlockedVault {
    /// The inode number the next new file gets; every inode in the index is below it (the mount's
    /// virtual thumbnail entries use numbers far above).
    public var nextInodeID: UInt64 { meta.withLock { $0.index.nextID } }
}

extension UnlockedVault {
    /// Every regular file that has a name, by inode ID (for `vaultaire thumbnails --rebuild`).
    public func namedFileIDs() -> [UInt64] {
        meta.withLock { s in
            s.index.inodes.values.filter { $0.kind == .file && $0.linkCount > 0 }.map(\.id).sorted()
        }
    }
}
