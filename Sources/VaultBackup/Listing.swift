import VaultCrypto
import VaultFormat

/// `vaultaire backup --list`: every snapshot on a remote, after unlocking.
public enum Listing {
    public struct Row {
        public var id: UInt64
        /// nil when the manifest failed its check (then `damage` says why).
        public var manifest: Manifest?
        public var damage: String?
    }

    /// The snapshots, oldest first; `notice` hears when the newest is older than one this device has
    /// seen there (newer snapshots deleted: a rollback).
    public static func run(
        rclone: Rclone, unlocking: Restore.Unlocking, status: (String) -> Void,
        notice: (String) -> Void = { _ in }
    ) throws -> [Row] {
        let remote = try RemoteBackup(rclone: rclone, requireSnapshot: true)
        status("fetching \(remote.contents.snapshots.count) manifests")
        try remote.fetchManifests(remote.contents.snapshots)
        let newest = remote.contents.snapshots.last!
        let (master, _) = try remote.unlock(for: newest, with: unlocking.open)
        defer { master.wipe() }
        var rows: [Row] = []
        for id in remote.contents.snapshots {
            do { rows.append(Row(id: id, manifest: try remote.manifest(id, master: master))) } catch let
                BackupError.remoteDamaged(_, what)
            {
                rows.append(Row(id: id, damage: what))
            }
        }
        if let vaultID = rows.last(where: { $0.manifest != nil })?.manifest?.vaultID,
            let best = rows.last(where: { $0.manifest != nil })?.id
        {
            let seen = try SeenSnapshots().newest(vaultID: vaultID, remote: rclone.remote)
            if best < seen {
                notice(
                    "remote \(rclone.remote): the newest snapshot is \(best), older than snapshot \(seen), which this device has seen there (a rollback)"
                )
            }
            try SeenSnapshots().record(best, vaultID: vaultID, remote: rclone.remote)
        }
        return rows
    }
}
