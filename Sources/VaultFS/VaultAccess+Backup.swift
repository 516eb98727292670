import VaultFormat

/// What `vaultaire backup` needs from the engine: the writers' lock, and a summary of the index.
extension VaultAccess {
    /// Runs `body` holding the vault's writers' lock (`mount.lock`), so that no writer — a read-write
    /// mount, `put`, `rm` — changes the vault meanwhile. Throws `FSError(EBUSY)` when one holds it;
    /// `notice` hears of a lock left by a process that is gone.
    public static func withWriterLock<R>(
        at path: String, notice: (String) -> Void = { _ in }, _ body: () throws -> R
    ) throws -> R {
        let layout = VaultLayout(root: path)
        _ = try layout.readHeader()  // a vault, not any directory
        let lock = try VaultLock.acquire(try layout.lockFile())
        if let stale = lock.staleNotice { notice(stale) }
        return try withExtendedLifetime(lock) { try body() }
    }
}

extension UnlockedVault {
    /// The number of regular files in the index and the sum of their sizes.
    public var contentSummary: (files: Int, bytes: UInt64) {
        meta.withLock { state in
            var files = 0
            var bytes: UInt64 = 0
            for node in state.index.inodes.values where node.kind == .file {
                files += 1
                bytes += node.size
            }
            return (files, bytes)
        }
    }
}
