import Glibc
import VaultFormat
import VaultSystem

/// One sign, in the vault directory, that the vault was written on two machines at once, as the
/// command shows it: a conflict copy a sync client left, or a blob newer than the index that the
/// index does not account for.
public struct SyncConflictCopy: Sendable {
    public enum Kind: Sendable {
        /// A sync client's copy of a vault file it could not merge.
        case conflictCopy
        /// A blob written after the index and unknown to it (`BlobNewerThanIndex`).
        case newerThanIndex
    }

    /// The copy's (or the blob's) full path.
    public let path: String
    /// What it holds, naming the vault file whose contents or thumbnail it is when the index has one.
    public let holds: String
    public let kind: Kind
    /// The blob of a `.newerThanIndex` finding.
    public let blobID: [UInt8]?
    /// Whether a record names that blob (its contents are a newer version of a known file).
    public let named: Bool

    public init(path: String, holds: String, kind: Kind = .conflictCopy, blobID: [UInt8]? = nil, named: Bool = false) {
        self.path = path
        self.holds = holds
        self.kind = kind
        self.blobID = blobID
        self.named = named
    }

    /// "1 conflict copy and 2 blobs newer than the index", for `copies`.
    public static func summary(_ copies: [SyncConflictCopy]) -> String {
        let copyCount = copies.filter { $0.kind == .conflictCopy }.count
        let newerCount = copies.count - copyCount
        var parts: [String] = []
        if copyCount > 0 { parts.append(copyCount == 1 ? "1 conflict copy" : "\(copyCount) conflict copies") }
        if newerCount > 0 {
            parts.append(newerCount == 1 ? "1 blob newer than the index" : "\(newerCount) blobs newer than the index")
        }
        return parts.joined(separator: " and ")
    }
}

/// The vault was written on two machines at once: a sync client left conflict copies beside the files
/// it could not merge, or brought blobs the index does not know yet. A writable open refuses before
/// it writes anything.
public struct SyncConflictError: Error, CustomStringConvertible {
    public let copies: [SyncConflictCopy]
    /// At most this many copies are listed in the message; `verify` lists them all.
    static let listed = 20

    public var description: String {
        var text = "this vault was written on two machines at once: "
        if copies.allSatisfy({ $0.kind == .conflictCopy }) {
            text += "a sync client left \(SyncConflictCopy.summary(copies)) beside its files. "
        } else {
            text +=
                "the sync folder holds \(SyncConflictCopy.summary(copies)) (a sync client still bringing the "
                + "other machine's index, or one that kept this machine's). "
        }
        text +=
            "Nothing has been changed; writing is refused until the copies are resolved (README: \"Using a vault in "
            + "a sync folder\"); ls, get, verify and mount --read-only still work."
        for copy in copies.prefix(SyncConflictError.listed) { text += "\n  \(copy.path): \(copy.holds)" }
        if copies.count > SyncConflictError.listed {
            text += "\n  … and \(copies.count - SyncConflictError.listed) more ('vaultaire verify' lists every one)"
        }
        return text
    }
}

extension UnlockedVault {
    /// The conflict copies `conflicts` in words, naming files by `files` (blob ID → path in the vault).
    static func describe(_ conflicts: [SyncConflict], root: String, files: [[UInt8]: String]) -> [SyncConflictCopy] {
        conflicts.map { c in
            SyncConflictCopy(path: root + "/" + c.path, holds: c.holds(file: c.blobID.flatMap { files[$0] }))
        }
    }

    /// Settles the blobs newer than the index that records name (`verify --repair`): each is copied,
    /// whole, to `lost+found/<blob ID>.newer-than-index` in the vault directory (the other machine's
    /// version of the file, which only that machine's index can name), then its record is marked
    /// `needsCheck` durably and repaired at once as after a crash: the file keeps what of the blob
    /// authenticates under the record (nothing, when the blob is another version altogether). A record
    /// whose repair fails keeps its mark, so the next writable open tries again. The journal written here
    /// is newer than those blobs: the index now accounts for them. Blobs no record names are left to the
    /// stray repair. Returns how many were set aside, and a notice for each file that lost data.
    public func settleNewerBlobs() throws -> (settled: Int, notices: [String]) {
        try requireWritable()
        let ids = syncConflicts.filter { $0.kind == .newerThanIndex && $0.named }.compactMap(\.blobID)
        guard !ids.isEmpty else { return (0, []) }
        let lostAndFound = try layout.directory().file("lost+found")
        if try !lostAndFound.exists() { try lostAndFound.makeDirectory() }
        var marked: [Inode] = []
        for id in ids {
            let destination = lostAndFound.appending(id.hex + ".newer-than-index")
            if try !destination.exists() { try UnlockedVault.copyWhole(try layout.blobFile(id), to: destination) }
            guard var node = meta.withLock({ s in s.index.inodes.values.first { $0.blobID == id } }) else { continue }
            node.needsCheck = true
            marked.append(node)
        }
        try lostAndFound.sync()
        // The mark is durable before the blob is touched: a crash during the repair leaves it to the next open.
        try meta.withLock { try $0.commit(marked.map { .putInode($0) }) }
        try syncJournal()
        var notices: [String] = []
        var repaired: [IndexChange] = []
        for var node in marked {
            do {
                if let lost = try reconcile(&node) { notices.append(lost) }
            } catch {
                notices.append("file \(node.id) could not be repaired: \(error)")
                meta.withLock { _ = $0.unrepaired.insert(node.id) }
                continue
            }
            node.needsCheck = false
            repaired.append(.putInode(node))
        }
        if !repaired.isEmpty {
            try syncBackingStore()
            try meta.withLock { try $0.commit(repaired) }
            try syncJournal()
        }
        return (ids.count, notices)
    }

    /// Copies `source` to a new file `destination` through a temporary beside it, renamed into place
    /// once whole and durable: an interrupted copy never leaves a partial file under the final name.
    static func copyWhole(_ source: AnchoredPath, to destination: AnchoredPath) throws {
        let from = try source.open(flags: O_RDONLY)
        try destination.replace { to in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var offset = 0
            while true {
                let n = try buffer.withUnsafeMutableBytes { try from.read(into: $0, at: offset) }
                guard n > 0 else { break }
                try to.write(Array(buffer[0..<n]), at: offset)
                offset += n
            }
        }
    }

    /// The index on disk, read without changing anything (for a refusal before the vault is opened);
    /// nil when it does not load (the open itself then reports why).
    static func readIndexUnchanged(layout: VaultLayout, header: VaultHeader, keys: KeySchedule) -> VaultState? {
        guard let directory = try? layout.indexDirectory() else { return nil }
        let store = IndexStore(directory: directory, vaultID: header.vaultID, key: keys.index)
        guard let (index, _) = try? store.load(forWriting: false) else { return nil }
        return VaultState(index: index, journal: store)
    }

    /// Of the blobs newer than the index, those the index does not account for, in words: a blob no
    /// record names, or one whose header or length is not what its record expects. A record marked
    /// `needsCheck` is expected to disagree with its blob (written while open) and is left to crash
    /// repair. When `inUse` (mount.lock names a process: the vault is open elsewhere, or its last
    /// session crashed) a blob no record names is what a file still being made, or an interrupted
    /// create, leaves, and is not counted.
    static func unaccounted(
        _ candidates: [BlobNewerThanIndex], state: VaultState, layout: VaultLayout, header: VaultHeader,
        keys: KeySchedule, inUse: Bool
    ) -> [SyncConflictCopy] {
        guard !candidates.isEmpty else { return [] }
        var byBlob: [[UInt8]: Inode] = [:]
        for node in state.index.inodes.values where node.kind == .file { byBlob[node.blobID] = node }
        let names = state.fileNamesByBlob()
        var found: [SyncConflictCopy] = []
        for blob in candidates {
            let path = layout.root + "/" + blob.path
            guard let node = byBlob[blob.blobID] else {
                if !inUse {
                    found.append(
                        SyncConflictCopy(
                            path: path,
                            holds:
                                "contents written after the index, of a file the index does not name (\(blob.length) bytes)",
                            kind: .newerThanIndex, blobID: blob.blobID))
                }
                continue
            }
            guard !node.needsCheck, !matchesRecord(node, layout: layout, header: header, keys: keys) else { continue }
            let file = names[blob.blobID] ?? "an unlinked file"
            found.append(
                SyncConflictCopy(
                    path: path,
                    holds: "contents of \(file) written after the index, not the version the index records",
                    kind: .newerThanIndex, blobID: blob.blobID, named: true))
        }
        return found
    }

    /// Whether a file's blob has the header and length its record expects.
    private static func matchesRecord(
        _ node: Inode, layout: VaultLayout, header: VaultHeader, keys: KeySchedule
    )
        -> Bool
    {
        guard let file = try? layout.blobFile(node.blobID) else { return false }
        if node.size == 0, (try? FileBlob.isEmpty(file: file)) == true { return true }
        guard
            let (blob, _) = try? FileBlob.open(
                file: file, blobID: node.blobID, inodeID: node.id, vaultID: header.vaultID,
                headerKey: keys.fileHeader, chunkSizeLog2: header.chunkSizeLog2, writable: false,
                version: node.contentVersion, layout: Int(node.blobLayout)),
            let length = try? blob.length()
        else { return false }
        return length == blob.expectedLength(size: Int(node.size))
    }
}

extension VaultState {
    /// Each named file's first path (in sort order) by its blob ID.
    func fileNamesByBlob() -> [[UInt8]: String] {
        let paths = pathsByInode()
        var names: [[UInt8]: String] = [:]
        for node in index.inodes.values where node.kind == .file && node.linkCount > 0 {
            if let path = paths[node.id]?.min() { names[node.blobID] = path }
        }
        return names
    }
}
