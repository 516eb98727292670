import Glibc
import VaultSystem

extension UnlockedVault {
    /// statvfs of the backing store, as the mount reports it.
    public func backingStatistics() throws -> statvfs {
        var s = statvfs()
        try retryingEINTR("statvfs", path: layout.root) { statvfs(layout.root, &s) }
        return s
    }
}
