import Foundation
import XCTest

/// VAULTAIRE_ALLOW_WEAK_KDF stays as the tests' escape hatch, but a vault made with it is never
/// silent (issue 22, finding 10): every command that opens it ends with one loud line on stderr,
/// and `info` and `verify` flag it. A vault at the floors gets none of this.
final class WeakKDFTests: XCTestCase {
    func testAWeakVaultIsFlaggedByEveryCommandThatOpensIt() throws {
        let w = try CLIWorld()
        let pw = w.file("pw", "correct horse battery\n")
        let vault = w.root + "/weak"
        let commands: [[String]] = [
            [
                "init", vault, "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
                "--recovery-phrase-out", w.root + "/phrase",
            ],
            ["mkdir", vault, "/d", "--passphrase-file", pw],
            ["put", vault, pw, "/d/f", "--passphrase-file", pw],
            ["ls", vault, "--passphrase-file", pw],
            ["get", vault, "/d/f", w.root + "/out", "--passphrase-file", pw],
            ["rm", vault, "/d/f", "--passphrase-file", pw],
            ["info", vault],
            ["verify", vault, "--passphrase-file", pw],
            ["passwd", vault, "--passphrase-file", pw, "--new-passphrase-file", pw],
            ["recover", vault, "--recovery-phrase-file", w.root + "/phrase", "--new-passphrase-file", pw],
            ["forget", vault],
        ]
        for command in commands {
            let r = try w.run(command)
            XCTAssertEqual(r.weakKDFWarnings, 1, "\(command[0]): \(r.stderr)")
            XCTAssertTrue(
                r.stderr.split(separator: "\n").last?.hasPrefix(
                    "Warning: weak key derivation: this vault's vault KDF 1000 iterations") == true,
                "\(command[0]): \(r.stderr)")
        }
        // Failures keep their error first; the warning follows.
        let wrong = try w.run(["ls", vault, "--passphrase-file", w.file("wrong", "not the passphrase")], expect: 12)
        XCTAssertTrue(wrong.stderr.hasPrefix("Error: wrong credential\n"), wrong.stderr)
        XCTAssertEqual(wrong.weakKDFWarnings, 1)
        XCTAssertTrue(try w.run(["info", vault]).stdout.contains("KDF strength:        WEAK — BELOW THE FLOORS"))
        XCTAssertTrue(
            try w.run(["verify", vault, "--passphrase-file", pw]).stdout.contains(
                "WEAK vault.header: key derivation below the floors"))
    }

    func testAVaultAtTheFloorsIsNotFlagged() throws {
        let w = try CLIWorld()
        let pw = w.file("pw", "correct horse battery\n")
        let vault = w.root + "/strong"
        w.environment["VAULTAIRE_ALLOW_WEAK_KDF"] = nil
        try w.run(["init", vault, "--passphrase-file", pw, "--recovery-phrase-out", w.root + "/phrase"])
        let info = try w.run(["info", vault])
        XCTAssertTrue(info.stdout.contains("KDF strength:        at or above the floors"), info.stdout)
        let ls = try w.run(["ls", vault, "--passphrase-file", pw])
        XCTAssertEqual(ls.stderr, "")
        XCTAssertEqual(w.outputs.filter { $0.contains("Warning") }, [])
    }
}
