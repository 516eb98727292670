import Glibc
import VaultCrypto
import VaultSystem

/// Compaction while the vault stays open. Writing the snapshot of a large vault takes seconds, so it
/// is written from a copy of the index outside the vault's lock, while requests go on appending to
/// the journal; only the last step, the switch to a journal that holds just the records after the
/// snapshot, takes the lock. The three steps, and what a crash after each leaves:
///
/// 1. `beginSnapshot` (locked): every waiting change is journaled; the snapshot will be the index at
///    the last sequence number, sealed with the next seal of the epoch's key.
/// 2. `writeSnapshot` and `copyJournal` (unlocked): the new snapshot replaces the old one atomically
///    and durably, beside the old journal, whose records up to its sequence number the next load skips
///    (as after a crash during any compaction). The records after it are copied into `journal.tmp`,
///    behind a fresh journal header, and synced.
/// 3. `finishSnapshot` (locked): the records appended since the copy are added to `journal.tmp` (and
///    synced, if there are any), which is renamed over the journal; the directory is synced before the
///    lock is let go, so no later record can be made durable in a file the directory does not yet name.
///
/// Key rotations and migrations are left to the compaction at lock (`compact`).
extension IndexStore {
    /// A snapshot on its way, from `beginSnapshot` to `finishSnapshot`.
    public struct PendingSnapshot {
        let seq: UInt64
        let head: [UInt8]
        let nonce: [UInt8]
        let sealsBefore: UInt64
        let key: SecureBytes
        /// Where the records after `seq` begin in the journal.
        let journalOffset: Int
        var snapshotLength = 0
        var copiedUpTo = 0
        var nextJournal: FileDescriptor?
    }

    /// Whether a compaction may run while the vault is open: the journal has outgrown both its floor
    /// and the snapshot, and no key rotation or migration is due.
    public var wantsCompactionWhileOpen: Bool {
        journal != nil && !tornTail && journalBytes > compactionThreshold
            && indexSeals + 1 < sealLimit && loadedVersion == IndexStore.formatVersion
    }

    /// Step 1, under the vault's lock: `state` at this moment is what the snapshot will hold.
    public func beginSnapshot() throws -> PendingSnapshot {
        try append([])
        let sealsBefore = indexSeals
        indexSeals += 1  // counted before the seal, as every seal is
        return PendingSnapshot(
            seq: lastSeq, head: IndexStore.snapshotHead(vaultID: vaultID, seq: lastSeq, epoch: epoch),
            nonce: try SecureRandom.bytes(AESGCM.nonceSize), sealsBefore: sealsBefore, key: try currentKey(),
            journalOffset: journalBytes)
    }

    /// Step 2a, without the lock: seals `state` (the index as `beginSnapshot` found it) into the
    /// snapshot file. Reads nothing that appends change.
    public func writeSnapshot(_ pending: inout PendingSnapshot, _ state: IndexState) throws {
        pending.snapshotLength = try IndexStore.sealSnapshot(
            state, to: snapshotFile, head: pending.head, nonce: pending.nonce, sealsBefore: pending.sealsBefore,
            key: pending.key)
    }

    /// Step 2b, without the lock: copies the journal's records from the snapshot's end up to `end`
    /// (a length the journal had under the lock, so only whole records) into `journal.tmp`, synced.
    public func copyJournal(_ pending: inout PendingSnapshot, upTo end: Int) throws {
        let next = try directory.appending("journal.tmp").createExclusive(replacingStale: true)
        let records = try journalFile.open(flags: O_RDONLY).read(
            count: end - pending.journalOffset, at: pending.journalOffset)
        guard records.count == end - pending.journalOffset else {
            throw FormatError.damaged("index journal shorter than its records")
        }
        try next.write(journalHead() + records, at: 0)
        try next.dataSync()
        pending.copiedUpTo = end
        pending.nextJournal = next
    }

    /// Step 3, under the vault's lock: the journal becomes the records after the snapshot.
    public func finishSnapshot(_ pending: PendingSnapshot) throws {
        guard let next = pending.nextJournal, journal != nil, !tornTail else {
            try? directory.appending("journal.tmp").remove()
            return
        }
        let head = journalHead().count
        let copied = pending.copiedUpTo - pending.journalOffset
        if journalBytes > pending.copiedUpTo {
            let late = try journalFile.open(flags: O_RDONLY).read(
                count: journalBytes - pending.copiedUpTo, at: pending.copiedUpTo)
            guard late.count == journalBytes - pending.copiedUpTo else {
                throw FormatError.damaged("index journal shorter than its records")
            }
            try next.write(late, at: head + copied)
            try next.dataSync()
        }
        try journalFile.rename(from: directory.appending("journal.tmp"))
        try directory.sync()
        journal = try journalFile.open(flags: O_WRONLY | O_APPEND)
        journalBytes = head + journalBytes - pending.journalOffset
        snapshotSeq = pending.seq
        snapshotBytes = pending.snapshotLength
    }
}
