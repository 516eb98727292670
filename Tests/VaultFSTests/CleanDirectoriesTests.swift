import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultSystem

/// The scan for conflict copies at open lists only the fan-out directories changed since the last
/// lock recorded them clean, and a copy that arrives at any moment — the vault locked, or open — is
/// still found by the next open.
final class CleanDirectoriesTests: XCTestCase {
    /// The fan-out directories a vault has (blobs/ at creation; thumbs/ as thumbnails are made).
    func fanOutCount(_ t: TestVault) -> Int {
        ["blobs", "thumbs"].reduce(0) { sum, top in
            sum + ((try? FileManager.default.contentsOfDirectory(atPath: t.path + "/" + top))?.count ?? 0)
        }
    }

    /// A vault whose directories are older than the settle time, opened and locked once, so that the
    /// lock has recorded every fan-out directory.
    func recordedVault() throws -> TestVault {
        let t = try TestVault()
        waitPastSettleTime()
        let first = try t.open()
        XCTAssertEqual(first.listedFanOutDirectories, fanOutCount(t), "no record: all listed")
        try first.close()
        return t
    }

    func waitPastSettleTime() { usleep(UInt32(CleanDirectories.settleTime / 1000) + 200_000) }

    /// A sync client's copy, put in place the way clients do it: written under a temporary name
    /// elsewhere, then renamed in.
    func dropCopy(in t: TestVault, directory: String) throws -> String {
        let name = directory + "/" + String(repeating: "a", count: 30) + ".sync-conflict-20261207-101010-ABCDEFG"
        let temporary = t.root + "/incoming"
        XCTAssertTrue(FileManager.default.createFile(atPath: temporary, contents: Data("other machine".utf8)))
        XCTAssertEqual(rename(temporary, t.path + "/" + name), 0, "rename into \(directory)")
        return name
    }

    func testAnUnchangedVaultIsNotListedAgain() throws {
        let t = try recordedVault()
        let second = try t.open(readOnly: true)
        XCTAssertEqual(second.listedFanOutDirectories, 0, "fan-out directories listed at the second open")
        try second.close()
    }

    func testAFileWrittenLeavesOnlyItsDirectoryToList() throws {
        let t = try recordedVault()
        let writer = try t.open()
        try writer.writeFile("/new", Array("new".utf8))
        let blob = try writer.resolve("/new").blobID.hex
        try writer.close()
        let reader = try t.open(readOnly: true)
        // Its directory changed less than the settle time before the lock: listed again, and only it.
        XCTAssertEqual(reader.listedFanOutDirectories, 1, "listed after one file was made in blobs/\(blob.prefix(2))")
        try reader.close()
    }

    func testACopyArrivingWhileTheVaultIsLockedIsFound() throws {
        let t = try recordedVault()
        let copy = try dropCopy(in: t, directory: "blobs/ab")
        XCTAssertThrowsError(try t.open(), "a writable open with a copy in blobs/ab") { error in
            XCTAssertTrue(error is SyncConflictError, "\(error)")
        }
        let reader = try t.open(readOnly: true)
        XCTAssertEqual(reader.syncConflicts.map(\.path), [t.path + "/" + copy], "copies a read-only open names")
        try reader.close()
    }

    func testACopyArrivingWhileTheVaultIsOpenIsFoundByTheNextOpen() throws {
        let t = try recordedVault()
        let open = try t.open()
        let copy = try dropCopy(in: t, directory: "blobs/3c")
        // Past the settle time, so that only the watch keeps blobs/3c from being recorded clean.
        waitPastSettleTime()
        try open.close()
        XCTAssertThrowsError(try t.open(), "a writable open after a copy arrived while open") { error in
            XCTAssertTrue(error is SyncConflictError, "\(error)")
        }
        let reader = try t.open(readOnly: true)
        XCTAssertEqual(reader.syncConflicts.map(\.path), [t.path + "/" + copy], "copies a read-only open names")
        try reader.close()
    }

    func testADirectoryWithACopyIsNeverRecordedClean() throws {
        let t = try recordedVault()
        let copy = try dropCopy(in: t, directory: "blobs/07")
        waitPastSettleTime()
        for round in 1...2 {
            let reader = try t.open(readOnly: true)
            XCTAssertEqual(reader.syncConflicts.map(\.path), [t.path + "/" + copy], "copies found, open \(round)")
            XCTAssertEqual(reader.listedFanOutDirectories, 1, "directories listed, open \(round)")
            try reader.close()
        }
    }

    func testARecordThatDoesNotAuthenticateIsIgnored() throws {
        let t = try recordedVault()
        let record = try XCTUnwrap(try CleanDirectories.file(vaultID: try VaultAccess.readHeader(at: t.path).vaultID))
        var bytes = try FileSystem.readFile(record)
        bytes[10] ^= 1
        try FileSystem.replaceFile(record, with: bytes)
        let reader = try t.open(readOnly: true)
        XCTAssertEqual(reader.listedFanOutDirectories, fanOutCount(t), "listed with a bad record")
        try reader.close()
    }

    func testADirectoryPutInPlaceOfAnotherIsListed() throws {
        let t = try recordedVault()
        let directory = t.path + "/blobs/5e"
        XCTAssertEqual(rename(directory, t.path + "/blobs-5e-old"), 0, "moving blobs/5e away")
        XCTAssertEqual(mkdir(directory, 0o700), 0, "a new blobs/5e")
        let reader = try t.open(readOnly: true)
        XCTAssertEqual(reader.listedFanOutDirectories, 1, "listed after blobs/5e was replaced")
        try reader.close()
    }
}
