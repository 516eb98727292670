import Foundation
import XCTest

/// The vault and keychain directories as an attacker's playground (issue 22, finding 1): links and
/// special files planted where Vaultaire reads or writes are refused with one line naming them
/// (exit 22); nothing is written through them and no file's contents reach a message.
final class VaultDirectoryTests: XCTestCase {
    let victimText = "IMPORTANT USER DATA\n"

    func setUp(_ w: CLIWorld) throws -> (vault: String, pw: String, victim: String) {
        let pw = w.file("pw", "correct horse battery\n")
        let vault = w.root + "/vault"
        try w.run([
            "init", vault, "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
            "--recovery-phrase-out", w.root + "/phrase",
        ])
        return (vault, pw, w.file("victim", victimText))
    }

    func assertRefused(_ r: CLIWorld.Result, naming path: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, 22, r.stderr, file: file, line: line)
        XCTAssertEqual(r.errorLines.count, 1, "one line: \(r.stderr)", file: file, line: line)
        XCTAssertTrue(r.stderr.hasPrefix("Error: \(path) is "), r.stderr, file: file, line: line)
    }

    func victimIsIntact(_ victim: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(
            try? String(contentsOfFile: victim, encoding: .utf8), victimText, "the victim changed", file: file,
            line: line)
    }

    func testALinkedLockFileIsRefusedAndTheVictimKept() throws {
        let w = try CLIWorld()
        let (vault, pw, victim) = try setUp(w)
        XCTAssertEqual(symlink(victim, vault + "/mount.lock"), 0)
        let r = try w.run(["mkdir", vault, "/d", "--passphrase-file", pw], expect: nil)
        assertRefused(r, naming: vault + "/mount.lock")
        victimIsIntact(victim)
        XCTAssertFalse(w.outputs.joined().contains("IMPORTANT"), "a file's contents reached the output")
    }

    func testALockFileWithoutAPIDIsClearedWithoutPrintingIt() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try setUp(w)
        _ = FileManager.default.createFile(atPath: vault + "/mount.lock", contents: Data(victimText.utf8))
        let r = try w.run(["mkdir", vault, "/d", "--passphrase-file", pw])
        XCTAssertTrue(r.stderr.contains("Notice: a leftover lock file was cleared"), r.stderr)
        XCTAssertFalse(r.stderr.contains("IMPORTANT"), r.stderr)
        // A leftover with a PID names it.
        _ = FileManager.default.createFile(atPath: vault + "/mount.lock", contents: Data("4194999\n".utf8))
        let stale = try w.run(["mkdir", vault, "/e", "--passphrase-file", pw])
        XCTAssertTrue(stale.stderr.contains("a lock left by process 4194999, which is gone"), stale.stderr)
    }

    /// The lock a killed writer left is the evidence the next writable open repairs by: commands that
    /// only take the lock for a moment to change the header (`passwd`, `device remove`) put it back.
    func testALeftoverLockOutlivesCommandsThatDoNotRepair() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try setUp(w)
        _ = FileManager.default.createFile(atPath: vault + "/mount.lock", contents: Data("4194999\n".utf8))
        let newPw = w.file("pw-new", "a new passphrase for the test\n")
        try w.run(["passwd", vault, "--passphrase-file", pw, "--new-passphrase-file", newPw])
        let kept = try String(contentsOfFile: vault + "/mount.lock", encoding: .utf8)
        XCTAssertEqual(kept, "4194999\n")
        let opened = try w.run(["mkdir", vault, "/d", "--passphrase-file", newPw])
        XCTAssertTrue(opened.stderr.contains("a lock left by process 4194999, which is gone"), opened.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: vault + "/mount.lock"))
    }

    /// A lock that a sync client brought from another machine (its line names another boot) is not
    /// this machine's crash: a blob no record names, newer than the index, is left where it is (it may
    /// be that machine's file whose index has not arrived), never moved or removed.
    func testALockFromAnotherBootSetsNothingAside() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try setUp(w)
        try w.run(["put", vault, pw, "/a.txt", "--passphrase-file", pw])
        let fm = FileManager.default
        let existing = try XCTUnwrap(
            try fm.subpathsOfDirectory(atPath: vault).first { $0.hasPrefix("blobs/") && $0.count == 39 })
        let foreign = "blobs/" + String(existing.dropFirst(6).prefix(3)) + String(repeating: "7", count: 30)
        try fm.copyItem(atPath: vault + "/" + existing, toPath: vault + "/" + foreign)
        try fm.setAttributes([.modificationDate: Date().addingTimeInterval(5)], ofItemAtPath: vault + "/" + foreign)
        _ = fm.createFile(
            atPath: vault + "/mount.lock", contents: Data("4194999 00000000-0000-0000-0000-000000000000\n".utf8))
        try w.run(["mkdir", vault, "/d", "--passphrase-file", pw], expect: nil)
        XCTAssertTrue(fm.fileExists(atPath: vault + "/" + foreign), "the other machine's blob is left in place")
        XCTAssertFalse(fm.fileExists(atPath: vault + "/lost+found"))
    }

    func testAFIFOAsTheLockFileIsRefusedWithoutHanging() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try setUp(w)
        XCTAssertEqual(mkfifo(vault + "/mount.lock", 0o600), 0)
        assertRefused(
            try w.run(["mkdir", vault, "/d", "--passphrase-file", pw], expect: nil), naming: vault + "/mount.lock")
    }

    func testALinkedHeaderTemporaryIsRefusedByPasswd() throws {
        let w = try CLIWorld()
        let (vault, pw, victim) = try setUp(w)
        XCTAssertEqual(symlink(victim, vault + "/vault.header.tmp"), 0)
        let r = try w.run(
            ["passwd", vault, "--passphrase-file", pw, "--new-passphrase-file", w.file("new", "a new passphrase\n")],
            expect: nil)
        assertRefused(r, naming: vault + "/vault.header.tmp")
        victimIsIntact(victim)
        let header = try FileManager.default.attributesOfItem(atPath: vault + "/vault.header")
        XCTAssertEqual(header[.type] as? FileAttributeType, .typeRegular)
        try w.run(["ls", vault, "--passphrase-file", pw])
    }

    func testLinkedVaultFilesAndDirectoriesAreRefused() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try setUp(w)
        let fm = FileManager.default
        // Each vault file or directory in turn becomes a link to a copy of itself: even a link to
        // intact data is refused, since whoever planted it can change where it points.
        for name in ["vault.header", "index", "index/journal", "index/snapshot", "blobs"] {
            let path = vault + "/" + name
            try fm.moveItem(atPath: path, toPath: w.root + "/moved")
            XCTAssertEqual(symlink(w.root + "/moved", path), 0)
            let command =
                name == "vault.header"
                ? ["info", vault]
                : ["put", vault, w.file("note", "note\n"), "/note-\(name.count)", "--passphrase-file", pw]
            assertRefused(try w.run(command, expect: nil), naming: path)
            try fm.removeItem(atPath: path)
            try fm.moveItem(atPath: w.root + "/moved", toPath: path)
        }
        try w.run(["verify", vault, "--passphrase-file", pw])
    }

    func testALinkedKeychainItemIsRefused() throws {
        let w = try CLIWorld()
        let (vault, pw, victim) = try setUp(w)
        let salt = w.root + "/data/vaultaire/keychain/device-salt"
        try FileManager.default.removeItem(atPath: salt)
        XCTAssertEqual(symlink(victim, salt), 0)
        assertRefused(try w.run(["ls", vault, "--passphrase-file", pw], expect: nil), naming: salt)
        assertRefused(
            try w.run(
                [
                    "init", w.root + "/v2", "--passphrase-file", pw, "--kdf-iterations", "1000",
                    "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/p2",
                ], expect: nil), naming: salt)
        victimIsIntact(victim)
        XCTAssertFalse(w.outputs.joined().contains("IMPORTANT"))
    }
}
