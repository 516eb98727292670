import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultSystem

/// The index compacted while the vault stays open: requests go on meanwhile, and the vault on disk is
/// whole at every moment, compacted or not.
final class OpenCompactionTests: XCTestCase {
    func testTheJournalIsCompactedWhileFilesAreMadeAndNothingIsLost() throws {
        let t = try TestVault()
        let vault = try t.open()
        let reports = Locked<[String]>([])
        vault.onReport { message in reports.withLock { $0.append(message) } }
        vault.meta.withLock { $0.journal.compactionFloor = 16 << 10 }
        var compactions = 0
        var lastSnapshot: UInt64 = 0
        for i in 0..<1500 {
            try vault.writeFile("/f\(i)", Array("file \(i)".utf8))
            let seq = vault.meta.withLock { $0.journal.snapshotSeq }
            if seq != lastSnapshot {
                compactions += 1
                lastSnapshot = seq
            }
            if i % 300 == 299 {
                // What a crash would leave now: everything made durable so far, whatever a compaction is doing.
                try vault.commit(durable: true)
                let reader = try t.open(readOnly: true)
                XCTAssertEqual(try reader.list(Inode.rootID).count, i + 1, "files seen by a reader after \(i + 1)")
                XCTAssertEqual(try reader.readFile("/f\(i)"), Array("file \(i)".utf8))
                try reader.close()
            }
        }
        vault.stopCompactingWhileOpen()
        let journalBytes = vault.meta.withLock { $0.journal.journalBytes }
        XCTAssertGreaterThan(compactions, 2, "compactions while open")
        XCTAssertLessThan(journalBytes, 200 << 10, "the journal holds only what came after the last snapshot")
        XCTAssertEqual(reports.withLock { $0 }, [], "nothing reported")
        XCTAssertFalse(try layout(t).indexDirectory().appending("journal.tmp").exists(), "no temporary left")
        try vault.close()

        let reopened = try t.open()
        XCTAssertEqual(try reopened.list(Inode.rootID).count, 1500)
        for i in stride(from: 0, to: 1500, by: 7) {
            XCTAssertEqual(try reopened.readFile("/f\(i)"), Array("file \(i)".utf8), "file \(i)")
        }
        XCTAssertTrue(reopened.verify().isIntact)
        try reopened.close()
    }

    /// Changes made while the snapshot is being written (from a copy of the index) are neither lost
    /// nor in the snapshot twice: they reach the new journal.
    func testChangesDuringTheSnapshotReachTheNewJournal() throws {
        let t = try TestVault()
        let vault = try t.open()
        for i in 0..<200 { try vault.writeFile("/a\(i)", [UInt8(i & 0xff)]) }
        // The steps by hand, with changes between them.
        let (store, first, frozen) = try vault.meta.withLock { s in
            (s.journal, try s.journal.beginSnapshot(), s.index)
        }
        var snapshot = first
        try vault.writeFile("/during-write", Array("w".utf8))
        try vault.unlink(in: Inode.rootID, name: "a0")
        try store.writeSnapshot(&snapshot, frozen)
        try vault.writeFile("/during-copy", Array("c".utf8))
        let end = vault.meta.withLock { $0.journal.journalBytes }
        try store.copyJournal(&snapshot, upTo: end)
        try vault.writeFile("/before-finish", Array("f".utf8))
        try vault.meta.withLock { s in try s.journal.finishSnapshot(snapshot) }
        try vault.writeFile("/after", Array("a".utf8))
        try vault.commit(durable: true)

        let reader = try t.open(readOnly: true)
        XCTAssertEqual(try reader.list(Inode.rootID).count, 203)
        XCTAssertThrowsError(try reader.resolve("/a0"))
        for name in ["during-write", "during-copy", "before-finish", "after"] {
            XCTAssertNoThrow(try reader.resolve("/" + name), name)
        }
        try reader.close()
        try vault.close()
    }

    private func layout(_ t: TestVault) -> VaultLayout { VaultLayout(root: t.path) }
}
