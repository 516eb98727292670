import Foundation
import XCTest

/// Commands on their unhappy paths: nothing the user had is lost by a failed or interrupted command,
/// and every error names what it is about.
final class UnhappyCommandTests: XCTestCase {
    private func content(_ w: CLIWorld, _ vault: String, _ pw: String, _ path: String) throws -> CLIWorld.Result {
        try w.run(["get", vault, path, "-", "--passphrase-file", pw], expect: nil)
    }

    /// Issue scenario: `put VAULT somedir /existing.txt` fails and leaves the old file as it was.
    func testFailedPutKeepsTheOldFile() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        try w.run(["put", vault, w.file("old", "the old content\n"), "/existing.txt", "--passphrase-file", pw])
        try FileManager.default.createDirectory(atPath: w.root + "/somedir", withIntermediateDirectories: true)
        let r = try w.run(["put", vault, w.root + "/somedir", "/existing.txt", "--passphrase-file", pw], expect: nil)
        XCTAssertEqual(r.status, 74, r.stderr)
        XCTAssertTrue(r.stderr.contains("local"), r.stderr)
        XCTAssertTrue(r.stderr.contains(w.root + "/somedir"), r.stderr)
        XCTAssertEqual(try content(w, vault, pw, "/existing.txt").stdout, "the old content\n")
        try w.run(["verify", vault, "--passphrase-file", pw])
    }

    /// SIGKILL, SIGTERM and SIGINT during a large put onto an existing file leave the old content;
    /// the next writable open reclaims what the interrupted put left, and verify stays quiet about it.
    func testInterruptedPutKeepsTheOldFile() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        try w.run(["put", vault, w.file("old", "the old content\n"), "/existing.txt", "--passphrase-file", pw])
        let fifo = w.root + "/slow-source"
        for signal in [SIGKILL, SIGTERM, SIGINT] {
            unlink(fifo)
            XCTAssertEqual(mkfifo(fifo, 0o600), 0)
            let (p, _, _) = try w.start(["put", vault, fifo, "/existing.txt", "--passphrase-file", pw])
            // Feed some data and keep the writer open, so the put is mid-copy when the signal comes.
            let writer = open(fifo, O_WRONLY)
            XCTAssertGreaterThanOrEqual(writer, 0)
            let chunk = [UInt8](repeating: 0x41, count: 1 << 20)
            for _ in 0..<4 { _ = chunk.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) } }
            usleep(300_000)
            kill(p.processIdentifier, signal)
            p.waitUntilExit()
            close(writer)
            XCTAssertNotEqual(p.terminationStatus, 0, "signal \(signal)")
            XCTAssertEqual(try content(w, vault, pw, "/existing.txt").stdout, "the old content\n", "signal \(signal)")
        }
        // A writable open reclaims the leftovers; afterwards no blob belongs to no file.
        try w.run(["mkdir", vault, "/after", "--passphrase-file", pw])
        let verify = try w.run(["verify", vault, "--passphrase-file", pw])
        XCTAssertFalse(verify.stdout.contains("belong to no file"), verify.stdout)
        XCTAssertFalse(verify.stderr.contains("belong to no file"), verify.stderr)
    }

    /// Local names that are not UTF-8 are refused with a clear error; two such names never collide.
    func testNonUTF8NamesAreNotMangled() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        let script = """
            set -u
            cd '\(w.root)' || exit 9
            printf first > $'x\\xfe'
            printf second > $'x\\xff'
            '\(w.binary)' put vault $'x\\xfe' / --passphrase-file pw; echo "fe:$?"
            '\(w.binary)' put vault $'x\\xff' / --passphrase-file pw; echo "ff:$?"
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", script]
        p.environment = w.environment
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let e = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertTrue(o.contains("fe:64"), o + e)
        XCTAssertTrue(o.contains("ff:64"), o + e)
        XCTAssertTrue(e.contains("not valid UTF-8"), e)
        let listing = try w.run(["ls", vault, "/", "--passphrase-file", pw])
        XCTAssertFalse(listing.stdout.contains("x"), listing.stdout)
        // With a destination name given, the content goes in under that name.
        try w.run(["put", vault, w.root + "/x\u{FFFD}-placeholder-missing", "/a", "--passphrase-file", pw], expect: 66)
    }

    /// `get` onto an existing local file refuses without --force; with --force and a damaged vault
    /// file, the local file keeps its content and the error names the vault path.
    func testGetNeverDestroysALocalFile() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        try w.run([
            "put", vault, w.file("src", String(repeating: "vault data\n", count: 1000)), "/doc.txt",
            "--passphrase-file", pw,
        ])
        let local = w.file("local.txt", "precious local data\n")
        let refused = try w.run(["get", vault, "/doc.txt", local, "--passphrase-file", pw], expect: 18)
        XCTAssertTrue(refused.stderr.contains(local), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--force"), refused.stderr)
        XCTAssertEqual(try String(contentsOfFile: local, encoding: .utf8), "precious local data\n")
        // Damage the file's only blob.
        let blobs = FileManager.default.enumerator(atPath: vault + "/blobs")!.compactMap { $0 as? String }.filter {
            $0.count == 33
        }
        XCTAssertEqual(blobs.count, 1)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: vault + "/blobs/" + blobs[0]))
        try handle.seek(toOffset: 1000)
        let byte = try XCTUnwrap(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: 1000)
        handle.write(Data([byte ^ 0xFF]))
        try handle.close()
        let damaged = try w.run(["get", vault, "/doc.txt", local, "--force", "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(damaged.stderr.contains("/doc.txt"), damaged.stderr)
        XCTAssertTrue(damaged.stderr.contains("in the vault"), damaged.stderr)
        XCTAssertFalse(damaged.stderr.contains("file 1"), damaged.stderr)
        XCTAssertEqual(try String(contentsOfFile: local, encoding: .utf8), "precious local data\n")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: w.root).filter {
            $0.hasPrefix(".local.txt")
        }
        XCTAssertEqual(leftovers, [])
    }

    /// Issue scenario: a copy of the vault put back after the original moved on is refused (exit 20)
    /// by every command, and accepted deliberately with --accept-rollback, with a warning.
    func testRestoringAnOlderCopy() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        try w.run(["put", vault, w.file("a", "first\n"), "/a.txt", "--passphrase-file", pw])
        let copy = w.root + "/copy"
        XCTAssertEqual(try runTool("/bin/cp", ["-a", vault, copy]), 0)
        try w.run(["put", vault, w.file("b", "second\n"), "/b.txt", "--passphrase-file", pw])
        XCTAssertEqual(try runTool("/bin/rm", ["-rf", vault]), 0)
        XCTAssertEqual(try runTool("/bin/mv", [copy, vault]), 0)
        for args in [["ls", vault], ["verify", vault], ["mkdir", vault, "/d"]] {
            let r = try w.run(args + ["--passphrase-file", pw], expect: 20)
            XCTAssertTrue(r.stderr.contains("--accept-rollback"), r.stderr)
        }
        let wrong = w.file("wrong", "not the passphrase at all\n")
        try w.run(["ls", vault, "--accept-rollback", "--passphrase-file", wrong], expect: 12)
        let accepted = try w.run(["ls", vault, "/", "--accept-rollback", "--passphrase-file", pw])
        XCTAssertTrue(accepted.stderr.contains("Warning:"), accepted.stderr)
        XCTAssertTrue(accepted.stdout.contains("a.txt"), accepted.stdout)
        // Accepted once, it opens as usual.
        try w.run(["verify", vault, "--passphrase-file", pw])
        try w.run(["mkdir", vault, "/d", "--passphrase-file", pw])
    }

    /// Exit codes and messages that say what happened.
    func testErrorsSayWhatHappened() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        // A missing passphrase file is a local file, not a file inside the vault.
        let missingSecret = try w.run(["ls", vault, "--passphrase-file", w.root + "/nope"], expect: 66)
        XCTAssertTrue(missingSecret.stderr.contains(w.root + "/nope"), missingSecret.stderr)
        // A missing vault path does not exist; it is not "not a vault".
        let missingVault = try w.run(["ls", w.root + "/no-such-vault", "--passphrase-file", pw], expect: 66)
        XCTAssertTrue(missingVault.stderr.contains("does not exist"), missingVault.stderr)
        // Errors of put, get, mkdir, rm name the path and say local or in the vault.
        let putMissing = try w.run(["put", vault, w.root + "/absent", "/x", "--passphrase-file", pw], expect: 66)
        XCTAssertTrue(putMissing.stderr.contains("local file \(w.root)/absent"), putMissing.stderr)
        let getMissing = try w.run(["get", vault, "/absent", "-", "--passphrase-file", pw], expect: 17)
        XCTAssertTrue(
            getMissing.stderr.contains("/absent") && getMissing.stderr.contains("in the vault"), getMissing.stderr)
        let mkdirMissing = try w.run(["mkdir", vault, "/no/such/parent", "--passphrase-file", pw], expect: 17)
        XCTAssertTrue(
            mkdirMissing.stderr.contains("/no/such/parent") && mkdirMissing.stderr.contains("in the vault"),
            mkdirMissing.stderr)
        let rmMissing = try w.run(["rm", vault, "/gone", "--passphrase-file", pw], expect: 17)
        XCTAssertTrue(rmMissing.stderr.contains("/gone") && rmMissing.stderr.contains("in the vault"), rmMissing.stderr)
        try w.run(["mkdir", vault, "/d", "--passphrase-file", pw])
        let mkdirTwice = try w.run(["mkdir", vault, "/d", "--passphrase-file", pw], expect: 18)
        XCTAssertTrue(mkdirTwice.stderr.contains("/d") && mkdirTwice.stderr.contains("in the vault"), mkdirTwice.stderr)
    }

    /// One flipped bit in this device's slot: the header's checksum shows the damage, so the error
    /// says the header is damaged — for the right credential and a wrong one alike, since neither can
    /// be told apart then — and `recover` (the recovery phrase) rewrites the slot and the header.
    func testDamagedCredentialEnvelopeIsNotAWrongCredential() throws {
        let w = try CLIWorld()
        let (vault, pw, phraseFile) = try w.makeVault()
        let headerPath = vault + "/vault.header"
        let original = try Data(contentsOf: URL(fileURLWithPath: headerPath))
        let range = try firstSlotCiphertext(original)
        var damaged = original
        damaged[range.lowerBound + 3] ^= 0x01
        try damaged.write(to: URL(fileURLWithPath: headerPath))
        let r = try w.run(["ls", vault, "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(r.stderr.contains("vault.header"), r.stderr)
        XCTAssertTrue(r.stderr.contains("damaged"), r.stderr)
        let wrong = try w.run(
            ["ls", vault, "--passphrase-file", w.file("wrong", "a different passphrase\n")], expect: 13)
        XCTAssertTrue(wrong.stderr.contains("damaged"), wrong.stderr)
        let recovered = try w.run([
            "recover", vault, "--recovery-phrase-file", phraseFile, "--new-passphrase-file",
            w.file("new", "a new passphrase after the damage\n"),
        ])
        XCTAssertTrue(recovered.stderr.contains("was damaged or altered"), recovered.stderr)
        try w.run(["ls", vault, "--passphrase-file", w.root + "/new"])
        let verify = try w.run(["verify", vault, "--passphrase-file", w.root + "/new"])
        XCTAssertTrue(verify.stdout.contains("all intact"), verify.stdout)
    }

    /// The first slot's sealed master key in a version-2 header (docs/FORMAT.md): the slot starts at
    /// 121; its name's length is at 144.
    private func firstSlotCiphertext(_ header: Data) throws -> Range<Int> {
        let bytes = [UInt8](header)
        XCTAssertEqual(bytes[4], 2)
        let nameLength = Int(bytes[144]) | Int(bytes[145]) << 8
        let start = 146 + nameLength + 12
        return start..<start + 48
    }

    private func runTool(_ path: String, _ args: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }
}
