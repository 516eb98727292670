import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFormat
@testable import VaultSystem

final class IndexStoreTests: XCTestCase {
    var dir = ""
    let vaultID = [UInt8](repeating: 7, count: 16)
    var key: SecureBytes!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectoryPath() + "/idx-\(UInt32.random(in: 0...UInt32.max))"
        key = try SecureBytes(randomCount: 32)
    }

    override func tearDown() { _ = system("rm -rf '\(dir)'") }

    /// `path` as the store sees it: beneath a descriptor of its parent directory.
    func anchored(_ path: String) throws -> AnchoredPath {
        try DirectoryDescriptor(path: FileSystem.parent(of: path)).file(String(path.split(separator: "/").last!))
    }

    func sampleChanges(_ n: Int) -> [[IndexChange]] {
        (0..<n).map { i in
            let inode = Inode(id: UInt64(10 + i), kind: .file, permissions: 0o644, uid: 0, gid: 0, now: Int64(i))
            return [.putInode(inode), .link(parent: Inode.rootID, name: "f\(i)", child: inode.id)]
        }
    }

    func testJournalReplaysAndCompacts() throws {
        let store = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        var expected = IndexState.empty(uid: 0, gid: 0, now: 0)
        try store.create(expected)
        _ = try store.load(forWriting: true)
        for c in sampleChanges(50) {
            try store.append(c)
            for x in c { try expected.apply(x) }
        }
        let (loaded, report) = try IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key).load(
            forWriting: false)
        XCTAssertEqual(loaded, expected)
        XCTAssertEqual(report.records, 50)
        try store.compact(expected)
        let again = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        let (compacted, r2) = try again.load(forWriting: false)
        XCTAssertEqual(compacted, expected)
        XCTAssertEqual(r2.records, 0)
        XCTAssertEqual(again.lastSeq, 50)
    }

    /// Deferred changes stay in memory until the next record, which carries them first, or a sync.
    func testDeferredChangesGoOutWithTheNextRecordOrASync() throws {
        let store = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        var expected = IndexState.empty(uid: 0, gid: 0, now: 0)
        try store.create(expected)
        _ = try store.load(forWriting: true)
        let changes = sampleChanges(3)
        func onDisk() throws -> (IndexState, Int) {
            let (state, report) = try IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key).load(
                forWriting: false)
            return (state, report.records)
        }

        try store.append(changes[0], deferred: true)
        XCTAssertTrue(store.hasDeferredChanges)
        XCTAssertEqual(try onDisk().1, 0, "nothing written yet")
        try store.append(changes[1])
        for c in changes[0] + changes[1] { try expected.apply(c) }
        XCTAssertFalse(store.hasDeferredChanges)
        XCTAssertEqual(try onDisk().0, expected)
        XCTAssertEqual(try onDisk().1, 1, "one record carries both")

        try store.append(changes[2], deferred: true)
        try store.sync()
        for c in changes[2] { try expected.apply(c) }
        XCTAssertEqual(try onDisk().0, expected, "a sync writes what waits")
        XCTAssertEqual(store.lastSeq, 2)
    }

    func testTornTailIsCutAndEveryOtherChangeIsDetected() throws {
        let store = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        try store.create(IndexState.empty(uid: 0, gid: 0, now: 0))
        _ = try store.load(forWriting: true)
        for c in sampleChanges(3) { try store.append(c) }
        store.close()
        let journal = try FileSystem.readFile(dir + "/journal")
        let snapshot = try FileSystem.readFile(dir + "/snapshot")

        // A write cut short by a crash: the last record is incomplete.
        try FileSystem.replaceFile(dir + "/journal", with: Array(journal.dropLast(5)))
        let (_, report) = try IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key).load(
            forWriting: true)
        XCTAssertEqual(report.records, 2)
        XCTAssertEqual(report.notices.count, 1)

        // Every bit flip of the journal: an error, or (only for a length field grown past the end) a
        // notice that the record was dropped — never a silently different index.
        var damaged = 0
        var dropped = 0
        for bit in 0..<(journal.count * 8) {
            var j = journal
            j[bit / 8] ^= 1 << (bit % 8)
            try FileSystem.replaceFile(dir + "/journal", with: j)
            do {
                let (_, r) = try IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key).load(
                    forWriting: false)
                XCTAssertFalse(r.notices.isEmpty, "bit \(bit) went unnoticed")
                dropped += 1
            } catch {
                damaged += 1
            }
        }
        XCTAssertEqual(damaged + dropped, journal.count * 8)
        print("journal bit flips: \(damaged) detected as damage, \(dropped) as an interrupted final record")

        try FileSystem.replaceFile(dir + "/journal", with: journal)
        for bit in 0..<(snapshot.count * 8) {
            var s = snapshot
            s[bit / 8] ^= 1 << (bit % 8)
            try FileSystem.replaceFile(dir + "/snapshot", with: s)
            XCTAssertThrowsError(
                try IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key).load(forWriting: false),
                "snapshot bit \(bit)")
        }
    }

    func testDroppedOrReorderedRecordsAreDetected() throws {
        let store = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        try store.create(IndexState.empty(uid: 0, gid: 0, now: 0))
        _ = try store.load(forWriting: true)
        var offsets: [Int] = [try FileSystem.readFile(dir + "/journal").count]
        for c in sampleChanges(3) {
            try store.append(c)
            offsets.append(try FileSystem.readFile(dir + "/journal").count)
        }
        let j = try FileSystem.readFile(dir + "/journal")
        let head = Array(j[0..<offsets[0]])
        let r = (0..<3).map { Array(j[offsets[$0]..<offsets[$0 + 1]]) }
        for variant in [head + r[0] + r[2], head + r[1] + r[0] + r[2], head + r[0] + r[0] + r[1]] {
            try FileSystem.replaceFile(dir + "/journal", with: variant)
            XCTAssertThrowsError(
                try IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key).load(forWriting: false))
        }
    }
}

/// Inputs that once crashed a fuzz target (scripts/fuzz.sh); each must now give a typed error.
final class FuzzRegressionTests: XCTestCase {
    func testJournalRecordWithTheLargestInodeNumber() {
        // FuzzJournal: a putInode with id 2^64 − 1 overflowed the next-ID computation.
        let record: [UInt8] = [
            1, 255, 255, 255, 255, 255, 255, 255, 255, 1, 2, 1, 0, 42, 64, 2, 83, 116, 114, 0, 0, 26, 41, 0, 2, 0, 16,
            0, 0, 8, 0, 0, 0, 223, 2, 2, 255, 0, 0, 0, 0, 0, 255, 2, 0, 16, 0, 0, 8, 0, 2, 0, 0, 0, 1, 0, 255, 255, 255,
            255, 255, 255, 255, 255, 41, 0, 83, 116, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 199, 199, 199, 199, 199,
            199, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 114, 0, 208,
        ]
        XCTAssertThrowsError(try IndexCodec.decodeAndApplyRecord(record))
    }

    func testHeaderWithANonZeroReservedByte() {
        // FuzzVaultHeader: a header whose reserved byte was not zero decoded, then re-encoded differently.
        let header: [UInt8] = [
            86, 76, 84, 86, 1, 0, 0, 0, 0, 193, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 12, 197, 1,
            0, 0, 0, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 86, 76, 84, 86, 1, 0, 0, 0, 0, 193, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 0, 0, 0, 1, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 0, 0, 0, 1, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 197,
            197, 197, 197, 197, 197, 197, 197, 197, 197, 197, 0, 0, 0, 1, 0,
        ]
        if let decoded = try? VaultHeader(decoding: header) { XCTAssertEqual(decoded.encoded(), header) }
    }
}

extension IndexStoreTests {
    /// Past the seal limit a compaction moves the index to the next key epoch; the index survives,
    /// a crash between the new snapshot and the new journal is tolerated, and the old key no longer opens it.
    func testCompactionPastTheSealLimitRotatesTheIndexKey() throws {
        let store = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        store.sealLimit = 5
        var expected = IndexState.empty(uid: 0, gid: 0, now: 0)
        try store.create(expected)
        _ = try store.load(forWriting: true)
        XCTAssertEqual(store.epoch, 0)
        for c in sampleChanges(6) {
            try store.append(c)
            for x in c { try expected.apply(x) }
        }
        XCTAssertEqual(store.indexSeals, 7, "one snapshot and six records")
        XCTAssertTrue(store.wantsCompaction)
        let oldJournal = try FileSystem.readFile(dir + "/journal")
        try store.compact(expected)
        XCTAssertEqual(store.epoch, 1)
        XCTAssertEqual(store.indexSeals, 1)
        let again = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        XCTAssertEqual(try again.load(forWriting: false).0, expected)
        XCTAssertEqual(again.epoch, 1)
        // The old epoch's journal beside the new snapshot (a crash mid-rotation): its records are skipped.
        try FileSystem.replaceFile(dir + "/journal", with: oldJournal)
        let afterCrash = IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key)
        XCTAssertEqual(try afterCrash.load(forWriting: true).0, expected)
        try afterCrash.append(sampleChanges(7).last!)
        XCTAssertEqual(
            try IndexStore(directory: try anchored(dir), vaultID: vaultID, key: key).load(forWriting: false).1.records,
            1)
    }
}

func NSTemporaryDirectoryPath() -> String {
    FileSystem.environment("TMPDIR") ?? "/tmp"
}
