import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Replacing a file whole, as `put` does: the new content is written to a file no directory names
/// yet (like O_TMPFILE), then given its name in one journal record that also drops what was there.
/// Until that record, the old file is untouched; if the writer dies first, the next writable open
/// removes the nameless file and its blob (`recoverAfterCrash` removes files with no links).
extension UnlockedVault {
    /// A new regular file with no name, open for writing. `name` goes into its sealed header (and
    /// picks its MIME type); it is the name `attach` is expected to give it.
    public func createDetached(named name: String, permissions: UInt32, caller: Caller) throws -> FileHandle {
        try requireWritable()
        try UnlockedVault.checkName(name)
        let node = try meta.withLock { s -> Inode in
            var node = Inode(
                id: s.index.nextID, kind: .file, permissions: permissions, uid: caller.uid, gid: caller.gid,
                now: nowNanoseconds())
            node.linkCount = 0
            node.mimeType = MIMETypes.guess(for: name)
            node.needsCheck = true
            node.blobID = try SecureRandom.bytes(16)
            try s.commit([.putInode(node)])
            return node
        }
        // The record is durable before the blob exists: a crash leaves a nameless record, which
        // recovery removes, never a blob nothing names.
        let blob: FileBlob
        do {
            try retryingWhenFull { try syncJournal() }
            try prepareFanOut(for: node.blobID)
            blob = try retryingWhenFull {
                try FileBlob.create(
                    file: try layout.blobFile(node.blobID), blobID: node.blobID, inodeID: node.id,
                    vaultID: header.vaultID, headerKey: keys.fileHeader, chunkSizeLog2: chunkSizeLog2,
                    name: name, mimeType: node.mimeType, version: node.contentVersion)
            }
        } catch {
            try? meta.withLock { try $0.commit([.removeInode(node.id)]) }
            throw error
        }
        let file = try meta.withLock { try $0.openNewFile(node.id, blob: blob, name: name) }
        return FileHandle(id: file.id, writable: true, append: false, file: file)
    }

    /// Names a file made by `createDetached` `name` in `parent`, replacing a non-directory there, in
    /// one journal record; durable when this returns. The replaced file's blob goes once that record is.
    public func attach(_ handle: FileHandle, in parent: UInt64, name: String) throws {
        try requireWritable()
        try UnlockedVault.checkName(name)
        try fsync(handle)
        let replaced = try retryingWhenFull {
            try meta.withLock { s -> Inode? in
                var node = try s.record(handle.id)
                guard node.linkCount == 0 else { throw FSError(EINVAL, "the file already has a name") }
                var directory = try s.record(parent)
                guard directory.kind == .directory else { throw FSError(ENOTDIR) }
                let now = nowNanoseconds()
                var changes: [IndexChange] = []
                var victim: Inode?
                if let existing = try s.directoryEntries(parent)[name] {
                    let v = try s.record(existing)
                    guard v.kind != .directory else { throw FSError(EISDIR) }
                    changes += s.entryRemoval(parent: &directory, name: name, node: v, now: now)
                    victim = v
                }
                node.linkCount = 1
                node.changeTime = now
                directory.modificationTime = now
                directory.changeTime = now
                changes += [.putInode(node), .link(parent: parent, name: name, child: node.id), .putInode(directory)]
                try s.commit(changes)
                return victim.flatMap { s.index.inodes[$0.id] == nil ? $0 : nil }
            }
        }
        try syncJournal()
        if let replaced { reapBlob(of: replaced) }
    }
}
