import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Who is asking: new nodes belong to the caller (the FUSE context's uid and gid).
public struct Caller {
    public var uid: UInt32
    public var gid: UInt32
    public init(uid: UInt32, gid: UInt32) { self.uid = uid; self.gid = gid }
    public static var current: Caller { Caller(uid: getuid(), gid: getgid()) }
}

/// What `rename` may do besides a plain move.
public enum RenameMode {
    case replace, noReplace, exchange
}

extension UnlockedVault {
    /// Creates a node of any kind in `parent`. Regular files get a blob with a sealed header.
    @discardableResult
    public func makeNode(in parent: UInt64, name: String, kind: Inode.Kind, permissions: UInt32, caller: Caller,
                         device: UInt64 = 0, symlinkTarget: [UInt8] = []) throws -> Inode {
        try makeNode(in: parent, name: name, kind: kind, permissions: permissions, caller: caller, device: device,
                     symlinkTarget: symlinkTarget, keepOpen: false)
    }

    /// With `keepOpen`, a new regular file is registered as open for writing (one handle) with the blob
    /// just created, saving a reopen and a header check on every create.
    func makeNode(in parent: UInt64, name: String, kind: Inode.Kind, permissions: UInt32, caller: Caller,
                  device: UInt64, symlinkTarget: [UInt8], keepOpen: Bool) throws -> Inode {
        try requireWritable()
        try UnlockedVault.checkName(name)
        return try meta.withLock {
            let entries = try directoryEntries(parent)
            guard entries[name] == nil else { throw FSError(EEXIST) }
            let parentRecord = try record(parent)
            let now = nowNanoseconds()
            // A new file's times come from the kernel's own clock tick (see coarseNowNanoseconds); its
            // directory's stay on the fine clock, so that they never step back behind an earlier change.
            var node = Inode(id: state.nextID, kind: kind, permissions: permissions, uid: caller.uid, gid: caller.gid,
                             now: kind == .file ? coarseNowNanoseconds() : now)
            // setgid directories pass their group (and, for directories, the bit) on, as the kernel expects.
            if parentRecord.permissions & UInt32(S_ISGID) != 0 {
                node.gid = parentRecord.gid
                if kind == .directory { node.permissions |= UInt32(S_ISGID) }
            }
            node.deviceNumber = device
            if kind == .symlink {
                guard symlinkTarget.count <= 4095 else { throw FSError(ENAMETOOLONG) }
                node.symlinkTarget = symlinkTarget
                node.size = UInt64(symlinkTarget.count)
            }
            if kind == .file {
                node.blobID = try SecureRandom.bytes(16)
                node.mimeType = MIMETypes.guess(for: name)
                node.needsCheck = true
                try prepareFanOut(for: node.blobID)
                // A file created open (the kernel's CREATE) keeps its header and its record back: they go
                // out with its first write and its close, or before any other record is written.
                let blob = try FileBlob.create(file: try layout.blobFile(node.blobID), blobID: node.blobID, inodeID: node.id,
                                               vaultID: header.vaultID, headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2,
                                               name: name, mimeType: node.mimeType, version: node.contentVersion,
                                               deferHeader: keepOpen)
                if keepOpen {
                    heldBackHeaders[node.id] = blob
                    let open = try OpenFile(id: node.id, blob: blob, size: 0, tolerateLastChunkFlag: true, cache: lendCache())
                    open.headerName = name
                    open.handles = 1
                    open.writers = 1
                    openFiles[node.id] = open
                }
            }
            var parentNode = parentRecord
            parentNode.modificationTime = now
            parentNode.changeTime = now
            if kind == .directory { parentNode.linkCount += 1 }
            do {
                try commitChanges([.putInode(node), .link(parent: parent, name: name, child: node.id), .putInode(parentNode)],
                                  deferred: keepOpen && kind == .file)
            } catch {
                // Nothing names the new file: take back its blob, so that a retry starts clean.
                if kind == .file {
                    heldBackHeaders[node.id] = nil
                    if let open = openFiles.removeValue(forKey: node.id) { open.dropCache() }
                    deleteBlob(node)
                }
                throw error
            }
            return node
        }
    }

    public func readLink(_ id: UInt64) throws -> [UInt8] {
        let node = try attributes(id)
        guard node.kind == .symlink else { throw FSError(EINVAL) }
        return node.symlinkTarget
    }

    /// A new hard link `name` in `parent` to file `id`.
    public func link(_ id: UInt64, into parent: UInt64, name: String) throws -> Inode {
        try requireWritable()
        try UnlockedVault.checkName(name)
        return try meta.withLock {
            var node = try record(id)
            guard node.kind != .directory else { throw FSError(EPERM) }
            guard try directoryEntries(parent)[name] == nil else { throw FSError(EEXIST) }
            let now = nowNanoseconds()
            node.linkCount += 1
            node.changeTime = now
            var p = try record(parent)
            p.modificationTime = now; p.changeTime = now
            try commitChanges([.link(parent: parent, name: name, child: id), .putInode(node), .putInode(p)])
            return node
        }
    }

    /// Removes a non-directory entry; the inode goes when its last link and last open handle are gone.
    public func unlink(in parent: UInt64, name: String) throws {
        try requireWritable()
        try meta.withLock {
            guard let id = try directoryEntries(parent)[name] else { throw FSError(ENOENT) }
            let node = try record(id)
            guard node.kind != .directory else { throw FSError(EISDIR) }
            try removeEntry(parent: parent, name: name, node: node, now: nowNanoseconds())
        }
    }

    /// Removes an empty directory.
    public func removeDirectory(in parent: UInt64, name: String) throws {
        try requireWritable()
        try meta.withLock {
            guard let id = try directoryEntries(parent)[name] else { throw FSError(ENOENT) }
            let node = try record(id)
            guard node.kind == .directory else { throw FSError(ENOTDIR) }
            guard try directoryEntries(id).isEmpty else { throw FSError(ENOTEMPTY) }
            try removeEntry(parent: parent, name: name, node: node, now: nowNanoseconds())
        }
    }

    /// Drops entry `name` → `node` and adjusts link counts; caller holds `meta`.
    private func removeEntry(parent: UInt64, name: String, node: Inode, now: Int64) throws {
        var p = try record(parent)
        p.modificationTime = now; p.changeTime = now
        var changes = entryRemoval(parent: &p, name: name, node: node, now: now)
        changes.append(.putInode(p))
        try commitChanges(changes)
        reapIfGone(node)
    }

    /// The changes that drop entry `name` → `node` from directory `parent` (whose record the caller
    /// updates and journals, with its link count adjusted here). Caller holds `meta`.
    func entryRemoval(parent: inout Inode, name: String, node: Inode, now: Int64) -> [IndexChange] {
        var changes: [IndexChange] = [.unlink(parent: parent.id, name: name)]
        if node.kind == .directory {
            parent.linkCount -= 1
            changes.append(.removeInode(node.id))
        } else {
            var n = node
            n.linkCount -= 1
            n.changeTime = now
            changes.append(n.linkCount == 0 && openFiles[node.id] == nil ? .removeInode(node.id) : .putInode(n))
        }
        return changes
    }

    /// Queues a removed file's blob for the reaper, once the index no longer has the file. The reaper
    /// makes the journal durable before it removes anything, so no durable record names a removed blob.
    func reapIfGone(_ node: Inode) {
        if node.kind == .file, state.inodes[node.id] == nil { reaper.remove(blobFiles(of: node)) }
    }

    /// Creates the blob's fan-out directory once per session (not a mkdir per file).
    func prepareFanOut(for blobID: [UInt8]) throws {
        guard !fanOutReady.contains(blobID[0]) else { return }
        try layout.prepareParent(of: try layout.blobFile(blobID))
        fanOutReady.insert(blobID[0])
    }

    /// The host files that hold a regular file's data: its blob and (if any) its thumbnail.
    func blobFiles(of node: Inode) -> [AnchoredPath] {
        guard !node.blobID.isEmpty, let blob = try? layout.blobFile(node.blobID), let thumbnail = try? layout.thumbnailFile(node.blobID) else { return [] }
        return [blob, thumbnail]
    }

    func deleteBlob(_ node: Inode) {
        for file in blobFiles(of: node) { try? file.remove() }
    }

    /// Moves `name` from `parent` to `newName` in `newParent`, as rename(2) and renameat2(2) do.
    public func rename(from parent: UInt64, name: String, to newParent: UInt64, newName: String, mode: RenameMode = .replace) throws {
        try requireWritable()
        try UnlockedVault.checkName(newName)
        try meta.withLock {
            guard let id = try directoryEntries(parent)[name] else { throw FSError(ENOENT) }
            let targetEntries = try directoryEntries(newParent)
            let existing = targetEntries[newName]
            let node = try record(id)
            if existing == id { return }  // same file: nothing to do
            if node.kind == .directory, try isAncestor(id, of: newParent) { throw FSError(EINVAL, "move into itself") }
            let now = nowNanoseconds()
            switch mode {
            case .noReplace where existing != nil:
                throw FSError(EEXIST)
            case .exchange:
                guard let other = existing else { throw FSError(ENOENT) }
                let otherNode = try record(other)
                if otherNode.kind == .directory, try isAncestor(other, of: parent) { throw FSError(EINVAL) }
                var changes: [IndexChange] = [
                    .unlink(parent: parent, name: name), .unlink(parent: newParent, name: newName),
                    .link(parent: parent, name: name, child: other), .link(parent: newParent, name: newName, child: id),
                ]
                if parent != newParent && (node.kind == .directory) != (otherNode.kind == .directory) {
                    var a = try record(parent), b = try record(newParent)
                    let delta: Int32 = node.kind == .directory ? 1 : -1
                    a.linkCount = UInt32(Int32(a.linkCount) - delta); b.linkCount = UInt32(Int32(b.linkCount) + delta)
                    a.modificationTime = now; a.changeTime = now; b.modificationTime = now; b.changeTime = now
                    changes += [.putInode(a), .putInode(b)]
                } else {
                    for dir in Set([parent, newParent]) {
                        var d = try record(dir); d.modificationTime = now; d.changeTime = now
                        changes.append(.putInode(d))
                    }
                }
                for var n in [node, otherNode] { n.changeTime = now; changes.append(.putInode(n)) }
                try commitChanges(changes)
                return
            default:
                break
            }
            // One journal record for the whole rename, the replaced entry included: a crash or a full
            // disk leaves either the old names or the new ones, never the target gone and the source
            // not moved (an editor's save renames over the file it replaces).
            var src = try record(parent)
            var dst = newParent == parent ? src : try record(newParent)
            var changes: [IndexChange] = []
            var victim: Inode?
            if let existing {
                let v = try record(existing)
                if node.kind == .directory {
                    guard v.kind == .directory else { throw FSError(ENOTDIR) }
                    guard try directoryEntries(existing).isEmpty else { throw FSError(ENOTEMPTY) }
                } else if v.kind == .directory {
                    throw FSError(EISDIR)
                }
                changes += entryRemoval(parent: &dst, name: newName, node: v, now: now)
                victim = v
            }
            if newParent == parent { src = dst }
            var moved = node
            moved.changeTime = now
            changes += [.unlink(parent: parent, name: name), .link(parent: newParent, name: newName, child: id)]
            src.modificationTime = now; src.changeTime = now
            if node.kind == .directory && parent != newParent { src.linkCount -= 1 }
            changes.append(.putInode(src))
            if newParent != parent {
                dst.modificationTime = now; dst.changeTime = now
                if node.kind == .directory { dst.linkCount += 1 }
                changes.append(.putInode(dst))
            }
            if node.kind == .file && name != newName { moved.mimeType = MIMETypes.guess(for: newName) }
            changes.append(.putInode(moved))
            try commitChanges(changes)
            if let victim { reapIfGone(victim) }
            if node.kind == .file && name != newName {
                do { try resealHeader(moved, name: newName) } catch {
                    // The index holds the new name; the header's copy (for recovery tools) lags until the next write.
                    report("rename: the sealed header of \(newName) keeps its old name: \(error)")
                }
            }
        }
    }

    /// Whether directory `ancestor` is `id` or lies above it. Caller holds `meta`.
    private func isAncestor(_ ancestor: UInt64, of id: UInt64) throws -> Bool {
        if ancestor == id { return true }
        // Walk down from `ancestor`; vault trees are shallow compared with their width.
        var stack = [ancestor]
        while let d = stack.popLast() {
            for (_, child) in state.entries[d] ?? [:] {
                if child == id { return true }
                if state.entries[child] != nil { stack.append(child) }
            }
        }
        return false
    }

    /// Keeps the sealed header's name and MIME type in step with a rename.
    private func resealHeader(_ node: Inode, name: String) throws {
        if let open = openFiles[node.id] {
            try writeHeader(open.blob, for: node, name: name)
            open.headerName = name
        } else {
            try writeHeader(try openBlob(node, writable: true).0, for: node, name: name)
        }
    }

    /// Attribute changes of chmod, chown and utimens (nil leaves a field alone).
    public struct AttributeChange {
        public var permissions: UInt32?
        public var uid: UInt32?
        public var gid: UInt32?
        public var accessTime: Int64?
        public var modificationTime: Int64?
        public init(permissions: UInt32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, accessTime: Int64? = nil, modificationTime: Int64? = nil) {
            self.permissions = permissions; self.uid = uid; self.gid = gid
            self.accessTime = accessTime; self.modificationTime = modificationTime
        }
    }

    @discardableResult
    public func setAttributes(_ id: UInt64, _ change: AttributeChange) throws -> Inode {
        try requireWritable()
        return try meta.withLock {
            var node = try record(id)
            if let p = change.permissions { node.permissions = p & 0o7777 }
            if let u = change.uid { node.uid = u }
            if let g = change.gid { node.gid = g }
            if let a = change.accessTime { node.accessTime = a }
            if let m = change.modificationTime { node.modificationTime = m }
            node.changeTime = nowNanoseconds()
            if let open = openFiles[id], open.writers > 0 {
                // A file open for writing has its record journaled when it is flushed, synced or
                // closed: tar's chown, chmod and utimens on the open file cost one record, not three.
                state.inodes[id] = node
                dirtyInodes.insert(id)
            } else {
                try commitChanges([.putInode(node)])
            }
            return node
        }
    }

    /// What a write, truncate or chown by someone without CAP_FSETID does to a local file: the
    /// set-user-ID bit goes, and the set-group-ID bit too when the group may execute the file or the
    /// caller is outside its group (`callerInGroup` answers that, and only when it matters).
    /// Returns whether the mode changed.
    @discardableResult
    public func dropSetIDBits(_ id: UInt64, callerInGroup: (UInt32) -> Bool) throws -> Bool {
        try requireWritable()
        let node = try attributes(id)
        guard node.kind == .file else { return false }
        var permissions = node.permissions & ~UInt32(S_ISUID)
        if permissions & UInt32(S_ISGID) != 0,
           permissions & UInt32(S_IXGRP) != 0 || !callerInGroup(node.gid) {
            permissions &= ~UInt32(S_ISGID)
        }
        guard permissions != node.permissions else { return false }
        try setAttributes(id, AttributeChange(permissions: permissions))
        return true
    }

    // MARK: Extended attributes (user.* only, sealed inside the index)

    /// Other namespaces are refused with ENOTSUP for reading too, not answered "no such attribute":
    /// the vault keeps no ACLs, labels or capabilities, and tools (`ls -l`, the kernel's ACL code)
    /// stop asking a filesystem that says so, where "none here" is asked again for every file.
    private func requireUserNamespace(_ name: String) throws {
        guard name.hasPrefix("user.") else { throw FSError(ENOTSUP) }
    }

    public func extendedAttribute(_ id: UInt64, name: String) throws -> [UInt8] {
        try requireUserNamespace(name)
        return try meta.withLock {
            guard let v = try record(id).extendedAttributes[name] else { throw FSError(ENODATA) }
            return v
        }
    }

    public func extendedAttributeNames(_ id: UInt64) throws -> [String] {
        try meta.withLock { try record(id).extendedAttributes.keys.sorted() }
    }

    public func setExtendedAttribute(_ id: UInt64, name: String, value: [UInt8], create: Bool, replace: Bool) throws {
        try requireWritable()
        try requireUserNamespace(name)
        guard name.utf8.count <= 255 else { throw FSError(ERANGE) }
        guard value.count <= 64 * 1024 else { throw FSError(E2BIG) }
        try meta.withLock {
            var node = try record(id)
            let exists = node.extendedAttributes[name] != nil
            if create && exists { throw FSError(EEXIST) }
            if replace && !exists { throw FSError(ENODATA) }
            guard exists || node.extendedAttributes.count < 256 else { throw FSError(ENOSPC) }
            node.extendedAttributes[name] = value
            node.changeTime = nowNanoseconds()
            try commitChanges([.putInode(node)])
        }
    }

    public func removeExtendedAttribute(_ id: UInt64, name: String) throws {
        try requireWritable()
        try requireUserNamespace(name)
        try meta.withLock {
            var node = try record(id)
            guard node.extendedAttributes[name] != nil else { throw FSError(ENODATA) }
            node.extendedAttributes[name] = nil
            node.changeTime = nowNanoseconds()
            try commitChanges([.putInode(node)])
        }
    }

    // MARK: Thumbnails

    public func setThumbnail(_ id: UInt64, image: [UInt8]) throws {
        try requireWritable()
        let node = try attributes(id)
        guard node.kind == .file else { throw FSError(EINVAL) }
        let sealed = try Thumbnail.seal(image, key: keys.thumbnail, vaultID: header.vaultID, inodeID: id, blobID: node.blobID)
        let file = try layout.thumbnailFile(node.blobID)
        try layout.prepareParent(of: file)
        try file.replace(with: sealed)
    }

    public func thumbnail(_ id: UInt64) throws -> [UInt8]? {
        let node = try attributes(id)
        guard node.kind == .file else { return nil }
        let file = try layout.thumbnailFile(node.blobID)
        guard try file.exists() else { return nil }
        return try Thumbnail.open(try file.read(limit: Thumbnail.maximumSize + 64), key: keys.thumbnail,
                                  vaultID: header.vaultID, inodeID: id, blobID: node.blobID)
    }

    /// statvfs of the backing store, as the mount reports it.
    public func backingStatistics() throws -> statvfs {
        var s = statvfs()
        try retryingEINTR("statvfs", path: layout.root) { statvfs(layout.root, &s) }
        return s
    }
}
