import VaultFormat

/// One conflict copy a sync client left in the vault directory, as the command shows it.
public struct SyncConflictCopy: Sendable {
    /// The copy's full path.
    public let path: String
    /// What it holds, naming the vault file whose contents or thumbnail it is when the index has one.
    public let holds: String
}

/// The vault was written on two machines at once: a sync client left conflict copies beside the files
/// it could not merge. A writable open refuses before it writes anything.
public struct SyncConflictError: Error, CustomStringConvertible {
    public let copies: [SyncConflictCopy]
    /// At most this many copies are listed in the message; `verify` lists them all.
    static let listed = 20

    public var description: String {
        let count = copies.count == 1 ? "1 conflict copy" : "\(copies.count) conflict copies"
        var text =
            "this vault was written on two machines at once: a sync client left \(count) beside its files. "
            + "Nothing has been changed; writing is refused until the copies are resolved (README: \"Using a vault in "
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

    /// Names for `conflicts` read from the index on disk without changing anything (for a refusal
    /// before the vault is opened); none when no copy is a blob's or a thumbnail's, or the index fails.
    static func fileNames(
        for conflicts: [SyncConflict], layout: VaultLayout, header: VaultHeader, keys: KeySchedule
    )
        -> [[UInt8]: String]
    {
        guard conflicts.contains(where: { $0.blobID != nil }), let directory = try? layout.indexDirectory()
        else { return [:] }
        let store = IndexStore(directory: directory, vaultID: header.vaultID, key: keys.index)
        guard let (index, _) = try? store.load(forWriting: false) else { return [:] }
        return VaultState(index: index, journal: store).fileNamesByBlob()
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
