/// Failures of a backup, a restore, or a look at a remote. Each names where the problem is: the remote
/// (`REMOTE:PATH` as given), the local machine, or the vault.
public enum BackupError: Error, Equatable, CustomStringConvertible {
    /// rclone could not reach or list the remote (network, credentials of the storage, no such remote).
    case remoteUnreachable(remote: String, reason: String)
    /// Something on the remote failed its check: a hash, a manifest, a header, a missing object.
    case remoteDamaged(remote: String, what: String)
    /// The remote holds no snapshot (or not the one asked for).
    case noBackup(remote: String, what: String)
    /// The remote holds the backups of another vault.
    case otherVault(remote: String)
    /// The snapshot is older than the newest this device has seen from this remote.
    case rollback(remote: String, seen: UInt64, found: UInt64)
    /// The restored vault fails verification where the vault backed up did too (its objects matched).
    case restoredWithDamage(target: String, damaged: Int, first: String)
    /// rclone is not installed (or not runnable).
    case rcloneMissing(reason: String)
    /// The backup format version of an object on the remote is not one this build reads.
    case unsupportedVersion(remote: String, version: Int)

    public var description: String {
        switch self {
        case .remoteUnreachable(let remote, let reason): return "remote \(remote): unreachable: \(reason)"
        case .remoteDamaged(let remote, let what): return "remote \(remote): backup damaged: \(what)"
        case .noBackup(let remote, let what): return "remote \(remote): \(what)"
        case .otherVault(let remote): return "remote \(remote): holds the backups of another vault"
        case .rollback(let remote, let seen, let found):
            return
                "remote \(remote): snapshot \(found) is older than snapshot \(seen), the newest this device has seen there (a rollback; restore it anyway with --accept-rollback)"
        case .restoredWithDamage(let target, let damaged, let first):
            return
                "in-vault \(target): restored, but \(damaged) file(s) fail verification, as they did when backed up (first \(first)); see 'vaultaire verify'"
        case .rcloneMissing(let reason):
            return "local: rclone cannot be run (\(reason)); install Debian's rclone package"
        case .unsupportedVersion(let remote, let version):
            return
                "remote \(remote): unsupported backup format version \(version) (this build reads version \(BackupFormat.version))"
        }
    }
}
