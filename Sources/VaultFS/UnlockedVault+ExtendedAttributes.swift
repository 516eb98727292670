import Glibc
import VaultFormat

/// Extended attributes: user.* only, sealed inside the index with the inode's record.
extension UnlockedVault {
    /// Other namespaces are refused with ENOTSUP for reading too, not answered "no such attribute":
    /// the vault keeps no ACLs, labels or capabilities, and tools (`ls -l`, the kernel's ACL code)
    /// stop asking a filesystem that says so, where "none here" is asked again for every file.
    private func requireUserNamespace(_ name: String) throws {
        guard name.hasPrefix("user.") else { throw FSError(ENOTSUP) }
    }

    public func extendedAttribute(_ id: UInt64, name: String) throws -> [UInt8] {
        try requireUserNamespace(name)
        return try meta.withLock { s in
            guard let v = try s.record(id).extendedAttributes[name] else { throw FSError(ENODATA) }
            return v
        }
    }

    public func extendedAttributeNames(_ id: UInt64) throws -> [String] {
        try meta.withLock { try $0.record(id).extendedAttributes.keys.sorted() }
    }

    public func setExtendedAttribute(_ id: UInt64, name: String, value: [UInt8], create: Bool, replace: Bool) throws {
        try requireWritable()
        try requireUserNamespace(name)
        guard name.utf8.count <= 255 else { throw FSError(ERANGE) }
        guard value.count <= 64 * 1024 else { throw FSError(E2BIG) }
        try meta.withLock { s in
            var node = try s.record(id)
            let exists = node.extendedAttributes[name] != nil
            if create && exists { throw FSError(EEXIST) }
            if replace && !exists { throw FSError(ENODATA) }
            guard exists || node.extendedAttributes.count < 256 else { throw FSError(ENOSPC) }
            node.extendedAttributes[name] = value
            node.changeTime = nowNanoseconds()
            try s.commit([.putInode(node)])
        }
    }

    public func removeExtendedAttribute(_ id: UInt64, name: String) throws {
        try requireWritable()
        try requireUserNamespace(name)
        try meta.withLock { s in
            var node = try s.record(id)
            guard node.extendedAttributes[name] != nil else { throw FSError(ENODATA) }
            node.extendedAttributes[name] = nil
            node.changeTime = nowNanoseconds()
            try s.commit([.putInode(node)])
        }
    }
}
