import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Who is asking: new nodes belong to the caller (the FUSE context's uid and gid).
public struct Caller {
    public var uid: UInt32
    public var gid: UInt32
    public init(uid: UInt32, gid: UInt32) {
        self.uid = uid
        self.gid = gid
    }
    public static var current: Caller { Caller(uid: getuid(), gid: getgid()) }
}

/// What `rename` may do besides a plain move.
public enum RenameMode {
    case replace, noReplace, exchange
}

extension UnlockedVault {
    /// Creates a node of any kind in `parent`. Regular files get a blob with a sealed header.
    @discardableResult
    public func makeNode(
        in parent: UInt64, name: String, kind: Inode.Kind, permissions: UInt32, caller: Caller,
        device: UInt64 = 0, symlinkTarget: [UInt8] = []
    ) throws -> Inode {
        try makeNode(
            in: parent, name: name, kind: kind, permissions: permissions, caller: caller, device: device,
            symlinkTarget: symlinkTarget, keepOpen: false)
    }

    /// With `keepOpen`, a new regular file is registered as open for writing (one handle) with the blob
    /// just created, saving a reopen and a header check on every create. A regular file's inode number
    /// is taken under `meta`, its blob created outside it, and the whole published under it again.
    func makeNode(
        in parent: UInt64, name: String, kind: Inode.Kind, permissions: UInt32, caller: Caller,
        device: UInt64, symlinkTarget: [UInt8], keepOpen: Bool
    ) throws -> Inode {
        try requireWritable()
        try UnlockedVault.checkName(name)
        if kind == .symlink, symlinkTarget.count > 4095 { throw FSError(ENAMETOOLONG) }
        var node = try meta.withLock { s -> Inode in
            guard try s.directoryEntries(parent)[name] == nil else { throw FSError(EEXIST) }
            let parentRecord = try s.record(parent)
            // A new file's times come from the kernel's own clock tick (see coarseNowNanoseconds); its
            // directory's stay on the fine clock, so that they never step back behind an earlier change.
            var node = Inode(
                id: s.index.nextID, kind: kind, permissions: permissions, uid: caller.uid, gid: caller.gid,
                now: kind == .file ? coarseNowNanoseconds() : nowNanoseconds())
            s.index.nextID += 1  // taken, even if the create fails from here on
            // setgid directories pass their group (and, for directories, the bit) on, as the kernel expects.
            if parentRecord.permissions & UInt32(S_ISGID) != 0 {
                node.gid = parentRecord.gid
                if kind == .directory { node.permissions |= UInt32(S_ISGID) }
            }
            return node
        }
        node.deviceNumber = device
        if kind == .symlink {
            node.symlinkTarget = symlinkTarget
            node.size = UInt64(symlinkTarget.count)
        }
        var blob: FileBlob?
        if kind == .file {
            node.blobID = try SecureRandom.bytes(16)
            node.mimeType = MIMETypes.guess(for: name)
            node.needsCheck = true
            try prepareFanOut(for: node.blobID)
            // A file created open (the kernel's CREATE) keeps its header and its record back: they go
            // out with its first write and its close, or before any other record is written.
            blob = try FileBlob.create(
                file: try layout.blobFile(node.blobID), blobID: node.blobID, inodeID: node.id,
                vaultID: header.vaultID, headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2,
                name: name, mimeType: node.mimeType, version: node.contentVersion,
                deferHeader: keepOpen)
        }
        do {
            try meta.withLock { s in
                guard try s.directoryEntries(parent)[name] == nil else { throw FSError(EEXIST) }
                var parentNode = try s.record(parent)
                let now = nowNanoseconds()
                parentNode.modificationTime = now
                parentNode.changeTime = now
                if kind == .directory { parentNode.linkCount += 1 }
                let deferred = keepOpen && kind == .file
                if let blob, keepOpen {
                    s.heldBackHeaders[node.id] = blob
                    _ = try s.openNewFile(node.id, blob: blob, name: name)
                }
                do {
                    try s.commit(
                        [.putInode(node), .link(parent: parent, name: name, child: node.id), .putInode(parentNode)],
                        deferred: deferred)
                } catch {
                    s.heldBackHeaders[node.id] = nil
                    if let open = s.openFiles.removeValue(forKey: node.id) { open.dropCache() }
                    throw error
                }
            }
        } catch {
            // Nothing names the new file: take back its blob, so that a retry starts clean.
            if blob != nil { deleteBlob(node) }
            throw error
        }
        return node
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
        return try meta.withLock { s in
            var node = try s.record(id)
            guard node.kind != .directory else { throw FSError(EPERM) }
            guard try s.directoryEntries(parent)[name] == nil else { throw FSError(EEXIST) }
            let now = nowNanoseconds()
            node.linkCount += 1
            node.changeTime = now
            var p = try s.record(parent)
            p.modificationTime = now
            p.changeTime = now
            try s.commit([.link(parent: parent, name: name, child: id), .putInode(node), .putInode(p)])
            return node
        }
    }

    /// Removes a non-directory entry; the inode goes when its last link and last open handle are gone.
    public func unlink(in parent: UInt64, name: String) throws {
        try requireWritable()
        let removed = try meta.withLock { s -> Inode? in
            guard let id = try s.directoryEntries(parent)[name] else { throw FSError(ENOENT) }
            let node = try s.record(id)
            guard node.kind != .directory else { throw FSError(EISDIR) }
            return try removeEntry(&s, parent: parent, name: name, node: node)
        }
        if let removed { reapBlob(of: removed) }
    }

    /// Removes an empty directory.
    public func removeDirectory(in parent: UInt64, name: String) throws {
        try requireWritable()
        try meta.withLock { s in
            guard let id = try s.directoryEntries(parent)[name] else { throw FSError(ENOENT) }
            let node = try s.record(id)
            guard node.kind == .directory else { throw FSError(ENOTDIR) }
            guard try s.directoryEntries(id).isEmpty else { throw FSError(ENOTEMPTY) }
            _ = try removeEntry(&s, parent: parent, name: name, node: node)
        }
    }

    /// Drops entry `name` → `node` and adjusts link counts; returns the node if it is gone now.
    private func removeEntry(_ s: inout VaultState, parent: UInt64, name: String, node: Inode) throws -> Inode? {
        let now = nowNanoseconds()
        var p = try s.record(parent)
        p.modificationTime = now
        p.changeTime = now
        var changes = s.entryRemoval(parent: &p, name: name, node: node, now: now)
        changes.append(.putInode(p))
        try s.commit(changes)
        return s.index.inodes[node.id] == nil ? node : nil
    }

    /// Queues a removed file's blob for the reaper, once the index no longer has the file. The reaper
    /// makes the journal durable before it removes anything, so no durable record names a removed blob.
    func reapBlob(of node: Inode) {
        if node.kind == .file { reaper.remove(blobFiles(of: node)) }
    }

    /// Creates the blob's fan-out directory once per session (not a mkdir per file).
    func prepareFanOut(for blobID: [UInt8]) throws {
        guard !meta.withLock({ $0.fanOutReady.contains(blobID[0]) }) else { return }
        try layout.prepareParent(of: try layout.blobFile(blobID))
        meta.withLock { _ = $0.fanOutReady.insert(blobID[0]) }
    }

    /// The host files that hold a regular file's data: its blob and (if any) its thumbnail.
    func blobFiles(of node: Inode) -> [AnchoredPath] {
        guard !node.blobID.isEmpty, let blob = try? layout.blobFile(node.blobID),
            let thumbnail = try? layout.thumbnailFile(node.blobID)
        else { return [] }
        return [blob, thumbnail]
    }

    func deleteBlob(_ node: Inode) {
        for file in blobFiles(of: node) { try? file.remove() }
    }

    /// Moves `name` from `parent` to `newName` in `newParent`, as rename(2) and renameat2(2) do.
    public func rename(
        from parent: UInt64, name: String, to newParent: UInt64, newName: String,
        mode: RenameMode = .replace
    ) throws {
        try requireWritable()
        try UnlockedVault.checkName(newName)
        let outcome = try meta.withLock { s in
            try renameEntries(&s, from: parent, name: name, to: newParent, newName: newName, mode: mode)
        }
        if let victim = outcome.removed { reapBlob(of: victim) }
    }

    /// What a rename leaves to do outside the lock: a replaced file to reap. (The sealed header keeps
    /// the name the file had when its header was last written: resealing it here, outside the lock,
    /// could write it from a record another open has moved on from.)
    private struct RenameOutcome {
        var removed: Inode?
    }

    private func renameEntries(
        _ s: inout VaultState, from parent: UInt64, name: String, to newParent: UInt64,
        newName: String, mode: RenameMode
    ) throws -> RenameOutcome {
        guard let id = try s.directoryEntries(parent)[name] else { throw FSError(ENOENT) }
        let existing = try s.directoryEntries(newParent)[newName]
        let node = try s.record(id)
        if existing == id { return RenameOutcome() }  // same file: nothing to do
        if node.kind == .directory, s.isAncestor(id, of: newParent) { throw FSError(EINVAL, "move into itself") }
        let now = nowNanoseconds()
        switch mode {
        case .noReplace where existing != nil:
            throw FSError(EEXIST)
        case .exchange:
            guard let other = existing else { throw FSError(ENOENT) }
            try exchangeEntries(
                &s, parent: parent, name: name, node: node, newParent: newParent, newName: newName,
                other: try s.record(other), now: now)
            return RenameOutcome()
        default:
            break
        }
        // One journal record for the whole rename, the replaced entry included: a crash or a full
        // disk leaves either the old names or the new ones, never the target gone and the source
        // not moved (an editor's save renames over the file it replaces).
        var src = try s.record(parent)
        var dst = newParent == parent ? src : try s.record(newParent)
        var changes: [IndexChange] = []
        var victim: Inode?
        if let existing {
            let v = try s.record(existing)
            if node.kind == .directory {
                guard v.kind == .directory else { throw FSError(ENOTDIR) }
                guard try s.directoryEntries(existing).isEmpty else { throw FSError(ENOTEMPTY) }
            } else if v.kind == .directory {
                throw FSError(EISDIR)
            }
            changes += s.entryRemoval(parent: &dst, name: newName, node: v, now: now)
            victim = v
        }
        if newParent == parent { src = dst }
        var moved = node
        moved.changeTime = now
        changes += [.unlink(parent: parent, name: name), .link(parent: newParent, name: newName, child: id)]
        src.modificationTime = now
        src.changeTime = now
        if node.kind == .directory && parent != newParent { src.linkCount -= 1 }
        changes.append(.putInode(src))
        if newParent != parent {
            dst.modificationTime = now
            dst.changeTime = now
            if node.kind == .directory { dst.linkCount += 1 }
            changes.append(.putInode(dst))
        }
        let renamedFile = node.kind == .file && name != newName
        if renamedFile { moved.mimeType = MIMETypes.guess(for: newName) }
        changes.append(.putInode(moved))
        try s.commit(changes)
        var outcome = RenameOutcome()
        if let victim, s.index.inodes[victim.id] == nil { outcome.removed = victim }
        return outcome
    }

    /// renameat2(RENAME_EXCHANGE): the two entries swap, in one record.
    private func exchangeEntries(
        _ s: inout VaultState, parent: UInt64, name: String, node: Inode, newParent: UInt64,
        newName: String, other otherNode: Inode, now: Int64
    ) throws {
        let other = otherNode.id
        if otherNode.kind == .directory, s.isAncestor(other, of: parent) { throw FSError(EINVAL) }
        var changes: [IndexChange] = [
            .unlink(parent: parent, name: name), .unlink(parent: newParent, name: newName),
            .link(parent: parent, name: name, child: other), .link(parent: newParent, name: newName, child: node.id),
        ]
        if parent != newParent && (node.kind == .directory) != (otherNode.kind == .directory) {
            var a = try s.record(parent)
            var b = try s.record(newParent)
            let delta: Int32 = node.kind == .directory ? 1 : -1
            a.linkCount = UInt32(Int32(a.linkCount) - delta)
            b.linkCount = UInt32(Int32(b.linkCount) + delta)
            a.modificationTime = now
            a.changeTime = now
            b.modificationTime = now
            b.changeTime = now
            changes += [.putInode(a), .putInode(b)]
        } else {
            for dir in Set([parent, newParent]) {
                var d = try s.record(dir)
                d.modificationTime = now
                d.changeTime = now
                changes.append(.putInode(d))
            }
        }
        for var n in [node, otherNode] {
            n.changeTime = now
            changes.append(.putInode(n))
        }
        try s.commit(changes)
    }
}
