import Foundation
import XCTest

/// What an altered remote does to `restore` and `backup --verify`: a flipped byte in an object, a
/// missing object, an old manifest under a newer name, a backup header changed, newer snapshots
/// deleted (a rollback). Each is refused with its exit code and one line naming the remote.
final class RemoteDamageTests: XCTestCase {
    var w: BackupWorld!
    var remote: String { w.root + "/remote" }

    override func setUpWithError() throws {
        w = try BackupWorld()
        try w.put(["/notes.txt": Data("first".utf8), "/photos/big.bin": BackupWorld.random(300_000)])
        try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        try w.put(["/later.txt": Data("second".utf8)])
        try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
    }

    override func tearDown() { w = nil }

    /// Restores on a new device and expects `status`; the target must not be left behind.
    func expectRefused(
        _ status: Int32, extra: [String] = [], mentioning text: String, file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        let target = w.root + "/restored-\(UInt32.random(in: 0...UInt32.max))"
        let r = try w.vaultaire(
            ["restore", remote, target, "--passphrase-file", w.passphraseFile] + extra, device: w.freshDevice(),
            expect: status, file: file, line: line)
        XCTAssertTrue(
            r.errorLines.count == 1 && r.errorLines[0].hasPrefix("Error: remote \(remote)")
                && r.errorLines[0].contains(text),
            r.stderr, file: file, line: line)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: target), "a refused restore left \(target)", file: file, line: line)
    }

    func testAFlippedByteInAnObjectIsDetected() throws {
        let victim = try w.largestObject(remote)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: remote + "/" + victim))
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: remote + "/" + victim))
        try expectRefused(24, mentioning: "does not match its hash")
        let r = try w.vaultaire(
            ["backup", "--verify", remote, "--passphrase-file", w.passphraseFile], device: w.freshDevice(), expect: 24)
        XCTAssertTrue(r.stderr.contains(victim), r.stderr)
    }

    func testAMissingObjectIsDetected() throws {
        let victim = try w.largestObject(remote)
        try FileManager.default.removeItem(atPath: remote + "/" + victim)
        try expectRefused(24, mentioning: "is missing")
    }

    func testAnOldManifestUnderANewerNameIsDetected() throws {
        try FileManager.default.removeItem(atPath: remote + "/snapshots/0000000002")
        try FileManager.default.copyItem(
            atPath: remote + "/snapshots/0000000001", toPath: remote + "/snapshots/0000000002")
        try expectRefused(24, mentioning: "holds the manifest of snapshot 1")
    }

    func testAChangedBackupHeaderIsDetected() throws {
        let key = try w.remoteFiles(remote).first { $0.hasPrefix("keys/") }!
        var bytes = try Data(contentsOf: URL(fileURLWithPath: remote + "/" + key))
        bytes[40] ^= 0x80
        try bytes.write(to: URL(fileURLWithPath: remote + "/" + key))
        try expectRefused(24, mentioning: "does not match its hash")
    }

    func testARollbackIsRefusedOnADeviceThatSawTheNewerSnapshot() throws {
        // The device that made snapshot 2 saw it; the remote is rolled back to snapshot 1.
        try FileManager.default.removeItem(atPath: remote + "/snapshots/0000000002")
        let list = try w.vaultaire(["backup", "--list", remote, "--passphrase-file", w.passphraseFile])
        XCTAssertTrue(
            list.errorLines.first?.hasPrefix("Notice: ") == true && list.stderr.contains("(a rollback)"), list.stderr)
        let target = w.root + "/rolled-back"
        let r = try w.vaultaire(["restore", remote, target, "--passphrase-file", w.passphraseFile], expect: 20)
        XCTAssertTrue(r.stderr.contains("snapshot 1 is older than snapshot 2"), r.stderr)
        try w.vaultaire(["restore", remote, target, "--passphrase-file", w.passphraseFile, "--accept-rollback"])
        XCTAssertEqual(try w.tree(of: target)["/notes.txt"], Data("first".utf8))
    }

    func testAnObjectCutShortByAnInterruptedUploadIsReplacedByTheNextBackup() throws {
        let victim = try w.largestObject(remote)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: remote + "/" + victim))
        try handle.truncate(atOffset: 10)
        try handle.close()
        let r = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        XCTAssertEqual(BackupWorld.number(after: "uploaded ", in: r.stdout), 1, r.stdout)
        try w.vaultaire(["backup", "--verify", remote, "--passphrase-file", w.passphraseFile], device: w.freshDevice())
    }

    func testDamageThatWasInTheVaultIsRestoredAndReported() throws {
        // A chunk of the big file's blob is damaged in the vault itself, then backed up faithfully.
        let blobs = try FileManager.default.subpathsOfDirectory(atPath: w.vault + "/blobs").map {
            w.vault + "/blobs/" + $0
        }
        let big = try blobs.max { try size($0) < size($1) }!
        var bytes = try Data(contentsOf: URL(fileURLWithPath: big))
        bytes[bytes.count - 100] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: big))
        try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let device = w.freshDevice()
        let target = w.root + "/restored-damaged"
        let r = try w.vaultaire(
            ["restore", remote, target, "--passphrase-file", w.passphraseFile], device: device, expect: 13)
        XCTAssertTrue(
            r.errorLines.first?.hasPrefix("Error: in-vault \(target): restored, but 1 file(s) fail verification")
                == true && r.stderr.contains("/photos/big.bin"), r.stderr)
        let good = w.root + "/notes-back"
        try w.vaultaire(["get", target, "/notes.txt", good, "--passphrase-file", w.passphraseFile], device: device)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: good)), Data("first".utf8))
    }

    func size(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    func testAWrongPassphraseIsRefused() throws {
        let wrong = w.write("wrong", Data("not the passphrase".utf8))
        let r = try w.vaultaire(
            ["restore", remote, w.root + "/x", "--passphrase-file", wrong], device: w.freshDevice(), expect: 12)
        XCTAssertEqual(r.errorLines, ["Error: remote \(remote): wrong credential (it opens no backup header there)"])
    }
}
