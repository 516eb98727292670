import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// Keeps the record of clean fan-out directories (`CleanDirectories`) true from one open of a vault
/// to the next, so that the scan for conflict copies at open lists only the directories changed since
/// the last lock. The fan-out directories are watched from before that scan until the vault is locked;
/// at the lock each that stayed quiet, and in which the scan found no copy, is recorded with its
/// change time then. Only on filesystems `CleanDirectories.trusts`.
final class ConflictWatch: @unchecked Sendable {  // `state` is reached only under its lock; the rest is immutable
    /// "blobs/00" … "thumbs/ff".
    static let fanOut: [String] = ["blobs", "thumbs"].flatMap { top in
        (0..<256).map { top + "/" + [UInt8($0)].hex }
    }

    private struct State {
        var finished = false
        var watch: DirectoryWatch?
        /// Fan-out directories the scan at open found copies in.
        var holdingCopies: Set<String> = []
    }

    /// The record the last lock left, for the scan at open.
    let record: CleanDirectories
    private let layout: VaultLayout
    private let vaultID: [UInt8]
    /// Authenticates the record (the mount daemon holds no master key); wiped at the lock.
    let recordKey: SecureBytes
    private let state: Guarded<State>

    /// Starts watching before the scan at open; nil on a filesystem where no record is kept.
    static func start(layout: VaultLayout, vaultID: [UInt8], master: SecureBytes) -> ConflictWatch? {
        guard CleanDirectories.trusts(layout), let root = try? layout.directory(),
            let key = try? CleanDirectories.key(master: master)
        else { return nil }
        let directories = fanOut.map { root.file($0) }
        let watch = DirectoryWatch(directories: directories) { SyncConflict.originalName(of: $0) != nil }
        return ConflictWatch(
            layout: layout, vaultID: vaultID, key: key, watch: watch,
            record: CleanDirectories.load(vaultID: vaultID, key: key))
    }

    private init(
        layout: VaultLayout, vaultID: [UInt8], key: SecureBytes, watch: DirectoryWatch?, record: CleanDirectories
    ) {
        self.layout = layout
        self.vaultID = vaultID
        self.recordKey = key
        self.record = record
        state = Guarded(State(watch: watch))
    }

    /// Reads the watch's events as they come, from now on in this process (see `DirectoryWatch.startReading`).
    func startReading() { _ = state.withLock { $0.watch }?.startReading() }

    /// What the scan at open found: those directories are not recorded as clean.
    func scanFound(_ copies: [SyncConflict]) {
        state.withLock { $0.holdingCopies.formUnion(copies.map(\.directory)) }
    }

    /// Ends the watch and records the directories known clean now, beside those of the last record
    /// that have not changed since. Once; a record that cannot be written only costs the next open time.
    func recordClean() {
        defer { recordKey.wipe() }
        guard
            let (watch, holdingCopies) = state.withLock({ s -> (DirectoryWatch?, Set<String>)? in
                guard !s.finished else { return nil }
                defer { (s.finished, s.watch) = (true, nil) }
                return (s.watch, s.holdingCopies)
            })
        else { return }
        guard let root = try? layout.directory() else { return }
        var rootStatus = stat()
        guard fstat(root.rawValue, &rootStatus) == 0 else { return }
        // Before the watch ends: a copy arriving after this is caught by the watch or moves the change time.
        let statuses = ConflictWatch.fanOut.map { try? root.file($0).status() }
        let quiet = watch?.finish() ?? ConflictWatch.fanOut.map { _ in nil }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let settled = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec) - CleanDirectories.settleTime
        var stamps: [String: CleanDirectories.Stamp] = [:]
        for (index, path) in ConflictWatch.fanOut.enumerated() {
            guard let status = statuses[index] ?? nil, status.isDirectory else { continue }
            if record.isUnchanged(path, status) {
                stamps[path] = CleanDirectories.Stamp(status)
                continue
            }
            guard let identity = quiet[index], !holdingCopies.contains(path),
                identity == DirectoryWatch.Identity(device: status.device, inode: status.inode),
                status.device == UInt64(rootStatus.st_dev), status.changed < settled
            else { continue }
            stamps[path] = CleanDirectories.Stamp(status)
        }
        try? CleanDirectories(stamps).save(vaultID: vaultID, key: recordKey)
    }

    /// Ends the watch without recording (a lock after a failure).
    func cancel() {
        defer { recordKey.wipe() }
        let watch = state.withLock { s -> DirectoryWatch? in
            defer { (s.finished, s.watch) = (true, nil) }
            return s.watch
        }
        _ = watch?.finish()
    }
}
