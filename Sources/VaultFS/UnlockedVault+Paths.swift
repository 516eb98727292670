import VaultFormat

extension UnlockedVault {
    /// A path inside the vault that names inode `id` (the first in order if hard links give several),
    /// or nil when no name leads to it (an open file already unlinked). For log lines: it walks the
    /// whole tree, so it is meant for the rare failure, not for every request.
    public func path(of id: UInt64) -> String? {
        if id == Inode.rootID { return "/" }
        return meta.withLock { $0.pathsByInode()[id]?.min() }
    }
}
