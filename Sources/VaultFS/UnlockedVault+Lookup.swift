import Glibc
import VaultFormat

/// Reading the namespace: records, names and paths. Each call reads under `meta` and returns copies.
extension UnlockedVault {
    /// The inode record `id`, with the live size of an open file.
    public func attributes(_ id: UInt64) throws -> Inode {
        try meta.withLock { try $0.record(id) }
    }

    public func lookup(_ parent: UInt64, _ name: String) throws -> Inode {
        guard name.utf8.count <= UnlockedVault.maximumNameLength else { throw FSError(ENAMETOOLONG) }
        return try meta.withLock { s in
            guard let child = try s.directoryEntries(parent)[name] else { throw FSError(ENOENT) }
            return try s.record(child)
        }
    }

    /// Resolves an absolute path inside the vault ("/" is the root); symlinks are not followed.
    public func resolve(_ path: String) throws -> Inode {
        try meta.withLock { s in
            var current = try s.record(Inode.rootID)
            for part in path.split(separator: "/") where part != "." {
                guard let child = try s.directoryEntries(current.id)[String(part)] else { throw FSError(ENOENT, path) }
                current = try s.record(child)
            }
            return current
        }
    }

    /// Splits a path into its parent directory's inode and the last name.
    public func resolveParent(_ path: String) throws -> (UInt64, String) {
        var parts = path.split(separator: "/").map(String.init)
        guard let name = parts.popLast() else { throw FSError(EINVAL, "the root has no parent") }
        let parent = try resolve("/" + parts.joined(separator: "/"))
        guard parent.kind == .directory else { throw FSError(ENOTDIR, path) }
        return (parent.id, name)
    }

    /// Directory listing, sorted by name.
    public func list(_ id: UInt64) throws -> [(name: String, inode: Inode)] {
        try meta.withLock { s in
            try s.directoryEntries(id).sorted { $0.key < $1.key }.map { ($0.key, try s.record($0.value)) }
        }
    }

    public var fileCount: Int { meta.withLock { $0.index.inodes.count } }

    /// Whether any regular file is open (the idle timeout waits for none to be).
    public var hasOpenFiles: Bool { meta.withLock { !$0.openFiles.isEmpty } }

    /// The index generation (last journal sequence number).
    public var generation: UInt64 { meta.withLock { $0.journal.lastSeq } }
}
