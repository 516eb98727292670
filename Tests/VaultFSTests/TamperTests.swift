import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultKeychain
@testable import VaultSystem

/// Changes an attacker (or a failing disk) could make to the vault directory.
final class TamperTests: XCTestCase {
    /// Reads every file through the engine; returns paths that failed. Any content that does come out
    /// must be exactly what was written.
    func readAll(
        _ tv: TestVault, expected: [String: [UInt8]], file: StaticString = #filePath, line: UInt = #line
    ) -> Set<String> {
        var failed = Set<String>()
        guard let v = try? tv.open(readOnly: true) else { return Set(expected.keys) }
        defer { try? v.close() }
        for (path, data) in expected {
            if let got = try? v.readFile(path) {
                XCTAssertEqual(got, data, "wrong plaintext from \(path)", file: file, line: line)
            } else {
                failed.insert(path)
            }
        }
        return failed
    }

    func testEveryBitFlipOfABlobIsDetectedAndNamed() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let expected = ["/small.txt": Array("a small secret file".utf8), "/two-chunks": randomBytes(5000)]
        for (p, d) in expected { try v.writeFile(p, d) }
        let blob = v.layout.blobPath(try v.resolve("/small.txt").blobID)
        try v.close()
        let original = try FileSystem.readFile(blob)
        let fd = try FileDescriptor(path: blob, flags: O_RDWR)
        var detected = 0
        let verifier = try tv.open(readOnly: true)
        for bit in 0..<(original.count * 8) {
            var b = [original[bit / 8] ^ (1 << (bit % 8))]
            try fd.write(b, at: bit / 8)
            let report = verifier.verify(scanForStrayBlobs: false)
            if report.damaged.map(\.path) == ["/small.txt"] { detected += 1 }
            // Reading it back never yields altered data (checked on a sample: reopening is slower).
            if bit % 97 == 0 { XCTAssertEqual(readAll(tv, expected: expected), ["/small.txt"], "bit \(bit)") }
            b[0] = original[bit / 8]
            try fd.write(b, at: bit / 8)
        }
        try verifier.close()
        print("blob bit flips: \(original.count * 8) tried, \(detected) detected and named")
        XCTAssertEqual(detected, original.count * 8)
    }

    func testChunkReorderSwapTruncationAndExtensionAreDetected() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let expected = ["/a": randomBytes(4096 * 3), "/b": randomBytes(4096 * 3)]
        for (p, d) in expected { try v.writeFile(p, d) }
        let pa = v.layout.blobPath(try v.resolve("/a").blobID)
        let pb = v.layout.blobPath(try v.resolve("/b").blobID)
        try v.close()
        let a = try FileSystem.readFile(pa)
        let b = try FileSystem.readFile(pb)
        let head = FileBlob.v2HeaderSize
        let slot = 4096 + FileBlob.chunkOverhead
        func chunk(_ bytes: [UInt8], _ i: Int) -> [UInt8] { Array(bytes[head + i * slot..<head + (i + 1) * slot]) }
        let cases: [(String, [UInt8], [UInt8])] = [
            ("reorder chunks 0 and 1", Array(a[0..<head]) + chunk(a, 1) + chunk(a, 0) + chunk(a, 2), b),
            ("chunk from the other file", Array(a[0..<head]) + chunk(b, 0) + chunk(a, 1) + chunk(a, 2), b),
            ("truncate the last chunk", Array(a.dropLast(slot)), b),
            ("truncate inside a chunk", Array(a.dropLast(100)), b),
            ("extend by a copied chunk", a + chunk(a, 2), b),
            ("swap whole blobs", b, a),
            ("header of the other file", Array(b[0..<head]) + Array(a[head...]), b),
        ]
        for (name, newA, newB) in cases {
            try FileSystem.replaceFile(pa, with: newA)
            try FileSystem.replaceFile(pb, with: newB)
            let verifier = try tv.open(readOnly: true)
            let report = verifier.verify()
            try verifier.close()
            XCTAssertTrue(report.damaged.map(\.path).contains("/a"), "\(name) not detected")
            _ = readAll(tv, expected: expected)
        }
        try FileSystem.replaceFile(pa, with: a)
        try FileSystem.replaceFile(pb, with: b)
        XCTAssertTrue(try tv.open(readOnly: true).verify().isIntact)
    }

    func testDeletedBlobIsNamedAndTheRestStaysReadable() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.writeFile("/gone", [1, 2, 3])
        try v.writeFile("/kept", [4, 5, 6])
        let gone = v.layout.blobPath(try v.resolve("/gone").blobID)
        try v.close()
        try FileSystem.remove(gone)
        let r = try tv.open(readOnly: true)
        XCTAssertEqual(r.verify().damaged.map(\.path), ["/gone"])
        XCTAssertEqual(try r.readFile("/kept"), [4, 5, 6])
        XCTAssertThrowsError(try r.readFile("/gone"))
        try r.close()
    }

    func testIndexRollbackIsRefusedOnceTheDeviceSawANewerGeneration() throws {
        let tv = try TestVault()
        var v = try tv.open()
        try v.writeFile("/one", [1])
        try v.close()
        let snapshot = try FileSystem.readFile(tv.path + "/index/snapshot")
        let journal = try FileSystem.readFile(tv.path + "/index/journal")
        v = try tv.open()
        try v.writeFile("/two", [2])
        try v.close()
        try FileSystem.replaceFile(tv.path + "/index/snapshot", with: snapshot)
        try FileSystem.replaceFile(tv.path + "/index/journal", with: journal)
        XCTAssertThrowsError(try tv.open()) {
            guard case FormatError.rollback = $0 else { return XCTFail("expected rollback, got \($0)") }
        }
    }
}

final class KeyManagementTests: XCTestCase {
    func snapshotOfBlobs(_ tv: TestVault) throws -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for id in try VaultLayout(root: tv.path).blobIDsOnDisk() {
            out[id.hex] = try FileSystem.readFile(VaultLayout(root: tv.path).blobPath(id))
        }
        out["index/snapshot"] = try FileSystem.readFile(tv.path + "/index/snapshot")
        out["index/journal"] = try FileSystem.readFile(tv.path + "/index/journal")
        return out
    }

    func testPasswdRewrapsOnlyTheHeader() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.writeFile("/doc.txt", Array("keep me".utf8))
        try v.close()
        let before = try snapshotOfBlobs(tv)
        let master = try VaultAccess.unwrapMasterKey(at: tv.path, credential: tv.credential(), keychain: tv.keychain)
        try VaultAccess.setCredential(
            at: tv.path, master: master, credential: tv.credential("a new passphrase"),
            pattern: nil, keychain: tv.keychain)
        XCTAssertEqual(try snapshotOfBlobs(tv), before, "no blob or index file may change")
        XCTAssertThrowsError(
            try VaultAccess.unwrapMasterKey(at: tv.path, credential: tv.credential(), keychain: tv.keychain)
        ) {
            XCTAssertEqual($0 as? FormatError, .wrongCredential)
        }
        let key = try VaultAccess.unwrapMasterKey(
            at: tv.path, credential: tv.credential("a new passphrase"), keychain: tv.keychain)
        let reopened = try VaultAccess.open(at: tv.path, master: key, keychain: tv.keychain, readOnly: true)
        XCTAssertEqual(try reopened.readFile("/doc.txt"), Array("keep me".utf8))
        try reopened.close()
    }

    func testRecoveryWorksWithAnEmptyKeychain() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.writeFile("/doc.txt", Array("recover me".utf8))
        try v.close()
        // Another machine: a keychain that has never seen this vault (another device salt).
        let elsewhere = Keychain(backend: FileKeychain(directory: tv.root + "/other-keychain"))
        _ = try elsewhere.deviceSalt(create: true)
        XCTAssertThrowsError(
            try VaultAccess.unwrapMasterKey(at: tv.path, credential: tv.credential(), keychain: elsewhere)
        ) {
            XCTAssertEqual($0 as? FormatError, .deviceMismatch)
        }
        let master = try VaultAccess.recoverMasterKey(at: tv.path, phrase: tv.phrase, wordlist: try Wordlist.load())
        try VaultAccess.setCredential(
            at: tv.path, master: master, credential: tv.credential("set on the new machine"),
            pattern: nil, keychain: elsewhere)
        let key = try VaultAccess.unwrapMasterKey(
            at: tv.path, credential: tv.credential("set on the new machine"), keychain: elsewhere)
        // The first machine keeps its own slot: it still opens with its credential, no recovery needed.
        let first = try VaultAccess.unwrapMasterKey(at: tv.path, credential: tv.credential(), keychain: tv.keychain)
        XCTAssertTrue(first.constantTimeEquals(key))
        XCTAssertEqual(try VaultAccess.readHeader(at: tv.path).slots.count, 2)
        let opened = try VaultAccess.open(at: tv.path, master: key, keychain: elsewhere, readOnly: true)
        XCTAssertEqual(try opened.readFile("/doc.txt"), Array("recover me".utf8))
        try opened.close()
        XCTAssertThrowsError(
            try VaultAccess.recoverMasterKey(at: tv.path, phrase: "abandon " + tv.phrase, wordlist: try Wordlist.load())
        )
    }

    func testMasterKeyIsGoneFromTheKeyScheduleAfterClose() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.close()
        XCTAssertTrue(v.keys.master.constantTimeEquals([UInt8](repeating: 0, count: 32)))
        XCTAssertTrue(v.keys.index.constantTimeEquals([UInt8](repeating: 0, count: 32)))
        XCTAssertThrowsError(try v.writeFile("/after", [1]))
    }
}

final class StaleStateTests: XCTestCase {
    /// A leftover temporary file, a torn journal record and a lock file from a dead process are each
    /// repaired at the next writable open, with a notice.
    func testLeftoversAreRecoveredWithNotices() throws {
        let tv = try TestVault()
        var v = try tv.open()
        try v.writeFile("/a", [1, 2, 3])
        try v.close()
        try FileSystem.replaceFile(tv.path + "/index/snapshot.tmp", with: [1, 2, 3])
        let journal = try FileDescriptor(path: tv.path + "/index/journal", flags: O_WRONLY | O_APPEND)
        try journal.append([200, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 7, 7])  // a record cut off mid-write
        try FileSystem.replaceFile(tv.path + "/mount.lock", with: Array("999999\n".utf8))
        v = try tv.open()
        let notices = v.notices.joined(separator: "\n")
        XCTAssertTrue(notices.contains("snapshot.tmp"), notices)
        XCTAssertTrue(notices.contains("incomplete record"), notices)
        XCTAssertTrue(notices.contains("999999"), notices)
        XCTAssertEqual(try v.readFile("/a"), [1, 2, 3])
        try v.close()
        let again = try tv.open()
        XCTAssertEqual(again.notices, [], "repaired once, quiet afterwards")
        XCTAssertTrue(again.verify().isIntact)
        try again.close()
    }

    /// A crash while a file is written out of order: the record (journaled by a rename) claims
    /// six chunks, but chunk 3 is still in the engine's cache, so the blob has a hole there. Reopening
    /// keeps the authenticated prefix, says so, and the vault verifies.
    func testRecordAheadOfAHoleyBlobIsCutToTheIntactPrefix() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let data = randomBytes(6 * 4096)
        let h = try v.create(in: Inode.rootID, name: "f", permissions: 0o644, caller: .current)
        try data.withUnsafeBytes { d in
            _ = try v.write(h, at: 0, from: UnsafeRawBufferPointer(rebasing: d[0..<3 * 4096]))
            // Cached:
            _ = try v.write(h, at: 3 * 4096, from: UnsafeRawBufferPointer(rebasing: d[3 * 4096..<3 * 4096 + 100]))
            // Past the hole:
            _ = try v.write(h, at: 4 * 4096, from: UnsafeRawBufferPointer(rebasing: d[4 * 4096..<6 * 4096]))
        }
        // Journals the record with its in-memory size:
        try v.rename(from: Inode.rootID, name: "f", to: Inode.rootID, newName: "g")
        v.wipeAndRelease()  // the crash: nothing written back, nothing closed

        let again = try tv.open()
        let notices = again.notices.joined(separator: "\n")
        XCTAssertTrue(notices.contains("lost data written after its last fsync"), notices)
        XCTAssertTrue((try? again.readFile("/g")) == Array(data[0..<3 * 4096]), "the intact prefix survives")
        XCTAssertTrue(again.verify().isIntact)
        try again.close()
    }
}
