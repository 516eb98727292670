import Foundation
import XCTest

/// Credentials for scripts (issue 26.4, issue 21 point 9): `--passphrase-file` reads pipes, FIFOs,
/// /dev/stdin and `-` to their end; `--extpass` runs a command and reads its output.
final class CredentialSourceTests: XCTestCase {
    var w: CLIWorld!
    var vault: String!
    let passphrase = "pw for the scripted test"

    /// XCTest keeps every test case object until the run ends: let go of the world (and its
    /// directory) after each test.
    override func tearDown() { w = nil }

    override func setUpWithError() throws {
        w = try CLIWorld()
        vault = w.root + "/vault"
        try w.run([
            "init", vault, "--passphrase-file", w.file("pw", passphrase + "\n"), "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/phrase",
        ])
        try w.run(["put", vault, w.file("note", "hello\n"), "/note", "--passphrase-file", w.root + "/pw"])
    }

    /// Runs `script` in bash (for `<(…)`, FIFOs and pipes) with $V the binary and $VAULT the vault.
    func bash(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws -> CLIWorld.Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", script]
        p.environment = w.environment.merging(["V": w.binary, "VAULT": vault, "ROOT": w.root]) { $1 }
        p.currentDirectoryURL = URL(fileURLWithPath: w.root)
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let r = CLIWorld.Result(
            status: p.terminationStatus, stdout: String(decoding: o, as: UTF8.self),
            stderr: String(decoding: e, as: UTF8.self))
        w.outputs.append(r.stdout + r.stderr)
        return r
    }

    func assertListsNote(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let r = try bash(script)
        XCTAssertEqual(r.status, 0, "\(script): \(r.stderr)", file: file, line: line)
        XCTAssertTrue(r.stdout.contains(" note"), "\(script): \(r.stdout)", file: file, line: line)
    }

    // Issue 21 point 9, exactly as reported: each of these read as empty ("wrong credential").
    func testProcessSubstitution() throws {
        try assertListsNote("\"$V\" ls \"$VAULT\" --passphrase-file <(printf '\(passphrase)\\n')")
    }

    func testFIFO() throws {
        try assertListsNote(
            """
            mkfifo "$ROOT/fifo"
            printf '\(passphrase)\\n' > "$ROOT/fifo" &
            "$V" ls "$VAULT" --passphrase-file "$ROOT/fifo"
            """)
    }

    func testDevStdin() throws {
        try assertListsNote("printf '\(passphrase)\\n' | \"$V\" ls \"$VAULT\" --passphrase-file /dev/stdin")
    }

    func testDashIsStandardInput() throws {
        try assertListsNote("printf '\(passphrase)\\n' | \"$V\" ls \"$VAULT\" --passphrase-file -")
        try assertListsNote("\"$V\" ls \"$VAULT\" --passphrase-file - < \"$ROOT/pw\"")
    }

    func testWithoutTrailingNewlineAndOnlyOneStripped() throws {
        try assertListsNote("printf '\(passphrase)' | \"$V\" ls \"$VAULT\" --passphrase-file -")
        let r = try bash("printf '\(passphrase)\\n\\n' | \"$V\" ls \"$VAULT\" --passphrase-file -")
        XCTAssertEqual(r.status, 12, "a second newline is part of the credential: \(r.stderr)")
    }

    func testStandardInputCannotCarryBothCredentialAndFile() throws {
        let r = try bash("\"$V\" put \"$VAULT\" - /x --passphrase-file - < \"$ROOT/pw\"")
        XCTAssertEqual(r.status, 64, r.stderr)
        XCTAssertTrue(r.stderr.hasPrefix("Error: standard input cannot carry both"), r.stderr)
    }

    func testStandardInputCarriesOneSecretOnly() throws {
        let r = try bash("printf 'a\\nb\\n' | \"$V\" passwd \"$VAULT\" --passphrase-file - --new-passphrase-file -")
        XCTAssertEqual(r.status, 64, r.stderr)
        XCTAssertTrue(
            r.stderr.hasPrefix(
                "Error: standard input can carry only one secret: --new-passphrase-file and --passphrase-file both read it"
            ), r.stderr)
    }

    func testExtpassRunsTheCommandThroughTheShell() throws {
        try assertListsNote("\"$V\" ls \"$VAULT\" --extpass \"printf '%s\\\\n' '\(passphrase)'\"")
        // Through a pipe inside the command: /bin/sh -c runs it.
        try assertListsNote("\"$V\" ls \"$VAULT\" --extpass \"cat '$ROOT/pw' | cat\"")
    }

    func testExtpassWorksForEveryCommandThatTakesAPassphraseFile() throws {
        try w.run(["get", vault, "/note", w.root + "/copy", "--extpass", "cat " + w.root + "/pw"])
        XCTAssertEqual(try String(contentsOfFile: w.root + "/copy", encoding: .utf8), "hello\n")
        try w.run(["verify", vault, "--extpass", "cat " + w.root + "/pw"])
        try w.run([
            "init", w.root + "/second", "--extpass", "echo a second vault passphrase", "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/phrase2",
        ])
        try w.run(["ls", w.root + "/second", "--passphrase-file", w.file("pw2", "a second vault passphrase\n")])
        let help = try w.run(["help", "mount"])
        XCTAssertTrue(help.stdout.contains("--extpass <command>"), help.stdout)
    }

    func testExtpassFailuresAreOneLineWithTheirOwnExitCode() throws {
        let cases: [(String, String)] = [
            ("exit 3", "Error: the --extpass command failed (exit status 3)"),
            ("true", "Error: the --extpass command gave an empty credential"),
            ("yes", "Error: the --extpass command gave more than 4096 bytes"),
            ("kill -TERM $$", "Error: the --extpass command was ended by signal 15"),
            ("/nonexistent/askpass", "Error: the --extpass command failed (exit status 127)"),
        ]
        for (command, message) in cases {
            let r = try w.run(["ls", vault, "--extpass", command], expect: 9)
            XCTAssertTrue(r.stderr.contains(message), "\(command): \(r.stderr)")
            XCTAssertEqual(
                r.stderr.split(separator: "\n").filter { $0.hasPrefix("Error:") }.count, 1, "\(command): \(r.stderr)")
        }
        try w.run(["ls", vault, "--extpass", "echo not the passphrase"], expect: 12)
        let both = try w.run(["ls", vault, "--extpass", "true", "--passphrase-file", w.root + "/pw"], expect: 64)
        XCTAssertTrue(both.stderr.hasPrefix("Error: give --passphrase-file or --extpass, not both"), both.stderr)
    }

    func testUnreadablePassphraseFilesExitWithTheCredentialCode() throws {
        // A missing file is the local-file error every command gives (66); other failures to read it are 9.
        let missing = try w.run(["ls", vault, "--passphrase-file", w.root + "/missing"], expect: 66)
        XCTAssertTrue(
            missing.stderr.hasPrefix(
                "Error: cannot open the local file of --passphrase-file \(w.root)/missing: No such file or directory"),
            missing.stderr)
        let empty = try w.run(["ls", vault, "--passphrase-file", "/dev/null"], expect: 9)
        XCTAssertTrue(
            empty.stderr.hasPrefix("Error: --passphrase-file /dev/null gave an empty credential"), empty.stderr)
        let directory = try w.run(["ls", vault, "--passphrase-file", w.root], expect: 9)
        XCTAssertTrue(
            directory.stderr.hasPrefix("Error: cannot read --passphrase-file \(w.root): Is a directory"),
            directory.stderr)
        let big = w.file("big", String(repeating: "x", count: 5000))
        try w.run(["ls", vault, "--passphrase-file", big], expect: 9)
    }

    func testNoCredentialInAnyOutput() throws {
        _ = try bash("\"$V\" ls \"$VAULT\" --passphrase-file <(printf '\(passphrase)\\n')")
        try w.run(["ls", vault, "--extpass", "echo " + passphrase + " wrong"], expect: 12)
        try w.run(["ls", vault, "--extpass", "echo " + passphrase + "; exit 4"], expect: 9)
        for output in w.outputs { XCTAssertFalse(output.contains(passphrase), output) }
    }
}
