import Foundation
import XCTest

/// No message may contain any part of a credential (issue 22, finding 2): every error path of
/// credential parsing — pattern vaults given a passphrase, malformed patterns, recovery phrases of
/// the wrong length, with an unknown word or a bad checksum — is run through the real binary and its
/// output scanned for the secret and for each of its parts.
final class CredentialLeakTests: XCTestCase {
    /// The parts of a secret worth looking for: the whole, each word or cell, each pair of neighbours.
    func parts(of secret: String) -> [String] {
        let pieces = secret.split(whereSeparator: { $0 == " " || $0 == "-" || $0 == "\n" }).map(String.init)
        let pairs =
            zip(pieces, pieces.dropFirst()).map { "\($0) \($1)" }
            + zip(pieces, pieces.dropFirst()).map { "\($0)-\($1)" }
        return [secret.trimmingCharacters(in: .whitespacesAndNewlines)] + pieces + pairs
    }

    func assertNothingOf(_ secrets: [String], in outputs: [String], file: StaticString = #filePath, line: UInt = #line)
    {
        let everything = outputs.joined(separator: "\n")
        for secret in secrets {
            for part in parts(of: secret) where everything.contains(part) {
                XCTFail("the output repeats '\(part)' of a credential:\n\(everything)", file: file, line: line)
            }
        }
    }

    func testPatternVaultErrorsRepeatNoCredential() throws {
        let w = try CLIWorld()
        let pattern = "b2-c3-b4-c1-d2"
        let vault = w.root + "/pv"
        try w.run([
            "init", vault, "--pattern", "--passphrase-file", w.file("pattern", pattern + "\n"), "--kdf-iterations",
            "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/phrase",
        ])
        // Credentials that are not patterns of this grid, each a distinct kind of parse error.
        let wrong = [
            "correct horse battery", "zebra-quilt-mango-fjord", "b2-c3-e9-c1", "b2-b2-c3-d3", "b3-c2",
            "b2-c3-b4-c1-d2-kx7",
        ]
        for text in wrong {
            let r = try w.run(["ls", vault, "--passphrase-file", w.file("wrong", text + "\n")], expect: 64)
            XCTAssertTrue(r.stderr.hasPrefix("Error: "), r.stderr)
            XCTAssertEqual(r.errorLines.count, 1, "one line: \(r.stderr)")
        }
        // The same through passwd (current and new credential) and init.
        let pw = w.file("pw", pattern + "\n")
        try w.run(
            [
                "passwd", vault, "--passphrase-file", w.file("old", "correct horse battery\n"), "--new-passphrase-file",
                pw,
                "--pattern",
            ], expect: 64)
        try w.run(
            [
                "passwd", vault, "--passphrase-file", pw, "--new-passphrase-file",
                w.file("new", "zebra-quilt-mango-fjord\n"),
                "--pattern",
            ], expect: 64)
        try w.run(
            [
                "init", w.root + "/other", "--pattern", "--passphrase-file", w.file("bad", "correct horse battery\n"),
                "--kdf-iterations", "1000", "--recovery-iterations", "1000",
            ], expect: 64)
        try w.run(["ls", vault, "--passphrase-file", pw])  // the right pattern still opens it
        assertNothingOf(wrong + [pattern], in: w.outputs)
    }

    func testRecoveryPhraseErrorsRepeatNoWord() throws {
        let w = try CLIWorld()
        let pw = w.file("pw", "correct horse battery\n")
        let vault = w.root + "/vault"
        try w.run([
            "init", vault, "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
            "--recovery-phrase-out", w.root + "/phrase",
        ])
        let phrase = try String(contentsOfFile: w.root + "/phrase", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        var words = phrase.split(separator: " ").map(String.init)
        let short = words.dropLast().joined(separator: " ")
        let unknown = (words.dropLast() + ["quixotry"]).joined(separator: " ")
        words.swapAt(0, 23)
        let swapped = words.joined(separator: " ")
        let newPw = w.file("new", "a new passphrase here\n")
        for (bad, code) in [
            (short, Int32(12)), (unknown, 12), (swapped, swapped == phrase ? 0 : 12), ("correct horse battery", 12),
        ] {
            let r = try w.run(
                [
                    "recover", vault, "--recovery-phrase-file", w.file("bad-phrase", bad + "\n"),
                    "--new-passphrase-file", newPw,
                ],
                expect: code)
            if code != 0 { XCTAssertEqual(r.errorLines.count, 1, "one line: \(r.stderr)") }
        }
        // The phrase given where a passphrase is expected: wrong credential, nothing repeated.
        try w.run(["ls", vault, "--passphrase-file", w.file("phrase-as-pw", phrase + "\n")], expect: 12)
        // Recovery words are ordinary English words that may occur in messages by chance: look for the
        // whole phrase and neighbouring pairs rather than single words.
        let everything = w.outputs.joined(separator: "\n")
        for candidate in [phrase, short, unknown, swapped] {
            let ws = candidate.split(separator: " ")
            for i in 0..<(ws.count - 1) {
                XCTAssertFalse(everything.contains("\(ws[i]) \(ws[i + 1])"), "two words of a phrase in the output")
            }
        }
        XCTAssertFalse(everything.contains("quixotry"))
        assertNothingOf(["correct horse battery"], in: w.outputs)
    }
}
