import Glibc
import VaultFormat
import VaultSystem

/// Compaction of the index while the vault stays open (see `IndexStore`'s "Compaction while the
/// vault stays open"): the snapshot is written from a copy of the index, outside `meta`, so requests
/// wait at most for the switch to the new journal. The copy costs little: the index's storage is
/// shared with it, and a change afterwards copies only the page it touches.
extension UnlockedVault {
    /// Lets `VaultState.commit` start a compaction once the journal has outgrown the snapshot.
    func allowCompactionWhileOpen() {
        meta.withLock { s in
            s.startCompaction = { [weak self] in
                guard let vault = self else { return false }
                return BackgroundThread.start(named: "vaultaire-compact") { vault.compactWhileOpen() }
            }
        }
    }

    func compactWhileOpen() {
        // Beside requests on a machine with few CPUs, the seconds of encoding and sealing a large
        // snapshot take the CPU only when nothing else wants it. The sections under `meta` are short.
        FileSystem.niceThread(19)
        defer { meta.withLock { $0.compacting = false } }
        do {
            let begun = try meta.withLock { s -> (IndexStore, IndexStore.PendingSnapshot, IndexState)? in
                guard !s.isClosed else { return nil }
                // The snapshot holds what the journal holds: in-memory record changes are journaled first,
                // and the held-back blob headers written before any record that names their blobs.
                let pending = s.dirtyInodes.compactMap { s.index.inodes[$0] }.map { IndexChange.putInode($0) }
                if !pending.isEmpty { try s.commit(pending) }
                try s.writeHeldBackHeaders()
                return (s.journal, try s.journal.beginSnapshot(), s.index)
            }
            guard let (store, first, frozen) = begun else { return }
            var snapshot = first
            try store.writeSnapshot(&snapshot, frozen)
            let end = meta.withLock { $0.journal.journalBytes }
            try store.copyJournal(&snapshot, upTo: end)
            try meta.withLock { s in
                guard !s.isClosed else { return }
                try s.journal.finishSnapshot(snapshot)
            }
        } catch {
            report("could not compact the index while the vault is open (the next lock does it): \(error)")
        }
    }

    /// Starts no more compactions beside the requests and waits for one running: before the vault
    /// locks, or compacts under its lock.
    func stopCompactingWhileOpen() {
        meta.withLock { $0.startCompaction = nil }
        while meta.withLock({ $0.compacting }) { usleep(1000) }
    }
}
