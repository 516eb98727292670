import Foundation
import XCTest

final class CommandTests: XCTestCase {
    func testDistinctExitCodesAndOneLineErrors() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        let wrong = w.file("wrong", "not the passphrase")
        let cases: [([String], [String: String], Int32)] = [
            (["frobnicate"], [:], 64),
            (["ls"], [:], 64),
            (["ls", vault, "--bogus"], [:], 64),
            (["ls", w.root, "--passphrase-file", pw], [:], 6),
            (["ls", vault, "--passphrase-file", wrong], [:], 12),
            (
                ["ls", vault, "--passphrase-file", pw],
                ["VAULTAIRE_KEYCHAIN": "", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"], 15
            ),
            (["get", vault, "/missing", w.root + "/out", "--passphrase-file", pw], [:], 17),
            (
                ["init", w.root + "/weak", "--passphrase-file", pw, "--kdf-iterations", "1000"],
                ["VAULTAIRE_ALLOW_WEAK_KDF": "0"], 64
            ),
            (
                [
                    "init", w.root + "/short", "--passphrase-file", w.file("short", "abc"), "--kdf-iterations", "1000",
                    "--recovery-iterations", "1000",
                ], [:], 64
            ),
        ]
        for (args, env, code) in cases {
            let r = try w.run(args, environment: env, expect: code)
            XCTAssertTrue(r.stderr.hasPrefix("Error: "), "\(args): \(r.stderr)")
            XCTAssertFalse(r.stderr.contains("Fatal error") || r.stderr.contains("Stack dump"), "\(args)")
        }
        // An unknown format version.
        var header = try Data(contentsOf: URL(fileURLWithPath: vault + "/vault.header"))
        header[4] = 9
        try header.write(to: URL(fileURLWithPath: vault + "/vault.header"))
        let r = try w.run(["ls", vault, "--passphrase-file", pw], expect: 14)
        XCTAssertTrue(r.stderr.contains("version 9"))
    }

    func testPutGetLsVerifyAndDamageIsNamed() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        let payload = (0..<200_000).map { _ in UInt8.random(in: 0...255) }
        let src = w.root + "/payload.bin"
        try Data(payload).write(to: URL(fileURLWithPath: src))
        try w.run(["mkdir", vault, "/docs", "--passphrase-file", pw])
        try w.run(["put", vault, src, "/docs/tax-return-2025.pdf", "--passphrase-file", pw])
        let ls = try w.run(["ls", vault, "/docs", "--passphrase-file", pw])
        XCTAssertTrue(ls.stdout.contains("tax-return-2025.pdf"))
        XCTAssertTrue(ls.stdout.contains("200000"))
        try w.run(["get", vault, "/docs/tax-return-2025.pdf", w.root + "/back.bin", "--passphrase-file", pw])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: w.root + "/back.bin")), Data(payload))
        try w.run(["verify", vault, "--passphrase-file", pw])
        // The vault directory holds neither the name nor the content.
        let grep = Process()
        grep.executableURL = URL(fileURLWithPath: "/bin/grep")
        grep.arguments = ["-r", "-l", "tax-return", vault]
        try grep.run()
        grep.waitUntilExit()
        XCTAssertEqual(grep.terminationStatus, 1, "a file name leaked into the vault directory")
        // Damage one blob: verify names the file and fails with the damaged code.
        let blobs = FileManager.default.enumerator(atPath: vault + "/blobs")!.compactMap { $0 as? String }.filter {
            $0.count == 33
        }
        XCTAssertEqual(blobs.count, 1)
        let blobPath = vault + "/blobs/" + blobs[0]
        var blob = try Data(contentsOf: URL(fileURLWithPath: blobPath))
        blob[blob.count - 100] ^= 0x20
        try blob.write(to: URL(fileURLWithPath: blobPath))
        let v = try w.run(["verify", vault, "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(v.stdout.contains("DAMAGED /docs/tax-return-2025.pdf"))
        try w.run(
            ["get", vault, "/docs/tax-return-2025.pdf", w.root + "/bad.bin", "--passphrase-file", pw], expect: 13)
    }

    func testPasswdRecoverRememberAndNoSecretInAnyOutput() throws {
        let w = try CLIWorld()
        let (vault, pw, phraseFile) = try w.makeVault(remember: true)
        let newPw = w.file("new", "a much better passphrase\n")
        let newer = w.file("newer", "recovered on a new machine\n")
        try w.run(["put", vault, w.file("note", "just a note\n"), "/note", "--passphrase-file", pw])
        try w.run(["ls", vault])  // remembered key: no credential needed
        try w.run(["passwd", vault, "--passphrase-file", pw, "--new-passphrase-file", newPw])
        try w.run(["ls", vault, "--passphrase-file", pw], expect: 12)
        try w.run(["ls", vault, "--passphrase-file", newPw])
        try w.run(["forget", vault])
        try w.run(["forget", vault])  // idempotent
        // A new machine: an empty keychain.
        w.environment["XDG_DATA_HOME"] = w.root + "/elsewhere"
        let r = try w.run(["ls", vault, "--passphrase-file", newPw], expect: 16)
        XCTAssertTrue(r.stderr.contains("vaultaire recover"))
        try w.run([
            "recover", vault, "--recovery-phrase-file", phraseFile, "--new-passphrase-file", newer, "--remember",
        ])
        try w.run(["verify", vault, "--passphrase-file", newer])
        try w.run(["info", vault, "--unlock"])
        try w.run(["get", vault, "/note", "-"])

        // Gather every secret in every form and look for it in everything printed.
        let phrase = try String(contentsOfFile: phraseFile, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let keyB64 = try String(
            contentsOfFile: w.root + "/elsewhere/vaultaire/keychain/"
                + (try FileManager.default.contentsOfDirectory(atPath: w.root + "/elsewhere/vaultaire/keychain").first {
                    $0.hasPrefix("master-key-")
                }!),
            encoding: .utf8)
        let key = Data(base64Encoded: keyB64)!
        XCTAssertEqual(key.count, 32)
        let keyHex = key.map { String(format: "%02x", $0) }.joined()
        let secrets = [
            "correct horse battery", "a much better passphrase", "recovered on a new machine", phrase,
            String(phrase.split(separator: " ")[0..<3].joined(separator: " ")), keyB64, keyHex, keyHex.uppercased(),
        ]
        let everything = w.outputs.joined(separator: "\n")
        XCTAssertGreaterThan(w.outputs.count, 10)
        for s in secrets {
            XCTAssertFalse(everything.contains(s), "a secret reached the output")
        }
        // The note's content is the first passphrase file, printed by `get -`: that is user data, not a leak.
    }

    /// `verify --recovery-phrase-file` checks the phrase itself: the right one passes, another vault's
    /// phrase is a wrong phrase (the header's MAC vouches for the envelope), not damage.
    func testVerifyChecksTheRecoveryPhrase() throws {
        let w = try CLIWorld()
        let (vault, pw, phraseFile) = try w.makeVault()
        let alone = try w.run(["verify", vault, "--recovery-phrase-file", phraseFile])
        XCTAssertTrue(alone.stdout.contains("and the recovery phrase: all intact"), alone.stdout)
        let both = try w.run(["verify", vault, "--passphrase-file", pw, "--recovery-phrase-file", phraseFile])
        XCTAssertTrue(both.stdout.contains("and the recovery phrase: all intact"), both.stdout)
        let other = w.root + "/other-phrase.txt"
        try w.run([
            "init", w.root + "/other", "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations",
            "1000", "--recovery-phrase-out", other,
        ])
        let wrong = try w.run(["verify", vault, "--passphrase-file", pw, "--recovery-phrase-file", other], expect: 12)
        XCTAssertTrue(wrong.stderr.contains("recovery phrase does not open"), wrong.stderr)
        try w.run(["verify", vault, "--recovery-phrase-file", other], expect: 12)
    }

    func testPatternCredentialAndInfo() throws {
        let w = try CLIWorld()
        let pattern = w.file("pattern", "a1-b2-c3-d4-c4\n")
        let vault = w.root + "/pv"
        try w.run([
            "init", vault, "--pattern", "--passphrase-file", pattern, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/pphrase",
        ])
        try w.run(["put", vault, pattern, "/drawn.txt", "--passphrase-file", pattern])
        try w.run(["ls", vault, "--passphrase-file", w.file("other", "a1-b2-c3-d4\n")], expect: 12)
        try w.run(["ls", vault, "--passphrase-file", w.file("bad", "a1-a1-b2-c3\n")], expect: 64)
        let info = try w.run(["info", vault])
        XCTAssertTrue(info.stdout.contains("pattern 4×4"), info.stdout)
        XCTAssertFalse(info.stdout.contains("drawn.txt"), "names only when unlocked")
        let unlocked = try w.run(["info", vault, "--unlock", "--passphrase-file", pattern])
        XCTAssertTrue(unlocked.stdout.contains("drawn.txt"))
    }

    func testHelpForEveryCommand() throws {
        let w = try CLIWorld()
        for c in [
            "init", "mount", "unmount", "status", "passwd", "recover", "forget", "info", "verify", "ls", "put", "get",
            "rm", "mkdir", "kdf-bench",
        ] {
            let a = try w.run([c, "--help"])
            let b = try w.run(["help", c])
            XCTAssertEqual(a.stdout, b.stdout)
            XCTAssertTrue(a.stdout.contains("USAGE: vaultaire \(c)"))
            XCTAssertTrue(a.stdout.contains("OPTIONS:"))
        }
    }
}
