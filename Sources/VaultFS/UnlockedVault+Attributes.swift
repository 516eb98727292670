import Glibc
import VaultFormat

/// chmod, chown, utimens and the set-ID rules.
extension UnlockedVault {
    /// Attribute changes of chmod, chown and utimens (nil leaves a field alone).
    public struct AttributeChange {
        public var permissions: UInt32?
        public var uid: UInt32?
        public var gid: UInt32?
        public var accessTime: Int64?
        public var modificationTime: Int64?
        public init(
            permissions: UInt32? = nil, uid: UInt32? = nil, gid: UInt32? = nil, accessTime: Int64? = nil,
            modificationTime: Int64? = nil
        ) {
            self.permissions = permissions
            self.uid = uid
            self.gid = gid
            self.accessTime = accessTime
            self.modificationTime = modificationTime
        }
    }

    @discardableResult
    public func setAttributes(_ id: UInt64, _ change: AttributeChange) throws -> Inode {
        try requireWritable()
        return try meta.withLock { s in
            var node = try s.record(id)
            if let p = change.permissions { node.permissions = p & 0o7777 }
            if let u = change.uid { node.uid = u }
            if let g = change.gid { node.gid = g }
            if let a = change.accessTime { node.accessTime = a }
            if let m = change.modificationTime { node.modificationTime = m }
            node.changeTime = nowNanoseconds()
            try publish(node, in: &s)
            return node
        }
    }

    /// What a write, truncate or chown by someone without CAP_FSETID does to a local file: the
    /// set-user-ID bit goes, and the set-group-ID bit too when the group may execute the file or the
    /// caller is outside its group (`callerInGroup` answers that, and only when it matters).
    /// Read and changed in one hold of the lock, so a concurrent chmod is never undone.
    /// Returns whether the mode changed.
    @discardableResult
    public func dropSetIDBits(_ id: UInt64, callerInGroup: (UInt32) -> Bool) throws -> Bool {
        try requireWritable()
        return try meta.withLock { s in
            var node = try s.record(id)
            guard node.kind == .file else { return false }
            var permissions = node.permissions & ~UInt32(S_ISUID)
            if permissions & UInt32(S_ISGID) != 0,
                permissions & UInt32(S_IXGRP) != 0 || !callerInGroup(node.gid)
            {
                permissions &= ~UInt32(S_ISGID)
            }
            guard permissions != node.permissions else { return false }
            node.permissions = permissions
            node.changeTime = nowNanoseconds()
            try publish(node, in: &s)
            return true
        }
    }

    /// A file open for writing has its record journaled when it is flushed, synced or closed: tar's
    /// chown, chmod and utimens on the open file cost one record, not three. Others are journaled now.
    private func publish(_ node: Inode, in s: inout VaultState) throws {
        if let open = s.openFiles[node.id], open.writers > 0 {
            s.index.inodes[node.id] = node
            s.dirtyInodes.insert(node.id)
        } else {
            try s.commit([.putInode(node)])
        }
    }
}
