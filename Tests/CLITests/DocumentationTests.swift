import Foundation
import XCTest

/// vaultaire(1) and the completion scripts (issue 26.7) come from `vaultaire __generate`, made from
/// the same specs as `help`; vaultaire-format(5) is written from docs/FORMAT.md. Each must render or
/// parse without a warning, and say what `help` says.
final class DocumentationTests: XCTestCase {
    var w: CLIWorld!
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    let commands = [
        "init", "mount", "unmount", "status", "passwd", "recover", "forget", "info", "verify", "ls", "put", "get",
        "rm", "mkdir", "kdf-bench", "version", "device", "upgrade", "backup", "restore", "thumbnail", "thumbnails",
    ]

    /// XCTest keeps every test case object until the run ends: let go of the world (and its
    /// directory) after each test.
    override func tearDown() { w = nil }

    override func setUpWithError() throws { w = try CLIWorld() }

    func generate(_ what: String) throws -> String {
        let r = try w.run(["__generate", what])
        let path = w.root + "/generated." + what
        try r.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Runs a tool; returns its status and everything it printed on standard error.
    func tool(
        _ path: String, _ args: [String], environment: [String: String] = [:]
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.environment = ["PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": w.root].merging(environment) { $1 }
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    func assertRendersWithoutWarnings(_ page: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let man = try tool(
            "/usr/bin/man", ["--warnings", "-l", page],
            environment: ["MANWIDTH": "80", "MANPAGER": "cat", "PAGER": "cat"])
        XCTAssertEqual(man.status, 0, man.stderr, file: file, line: line)
        XCTAssertEqual(man.stderr, "", "man -l --warnings", file: file, line: line)
        XCTAssertGreaterThan(man.stdout.count, 1000, file: file, line: line)
        let groff = try tool("/usr/bin/groff", ["-ww", "-z", "-man", "-Tutf8", page])
        XCTAssertEqual(groff.status, 0, file: file, line: line)
        XCTAssertEqual(groff.stderr, "", "groff -ww", file: file, line: line)
        let mandoc = try tool("/usr/bin/mandoc", ["-T", "lint", "-W", "warning", page])
        XCTAssertEqual(mandoc.status, 0, mandoc.stdout + mandoc.stderr, file: file, line: line)
        XCTAssertEqual(mandoc.stdout + mandoc.stderr, "", "mandoc -T lint", file: file, line: line)
    }

    func testManPageRendersWithoutWarnings() throws {
        try assertRendersWithoutWarnings(try generate("man"))
    }

    func testFormatManPageRendersWithoutWarnings() throws {
        try assertRendersWithoutWarnings(DocumentationTests.repository + "/docs/man/vaultaire-format.5")
    }

    /// Every command and every option `help` shows is in the man page, with its help text.
    func testManPageSaysWhatHelpSays() throws {
        let page = try tool(
            "/usr/bin/man", ["-l", try generate("man")], environment: ["MANWIDTH": "1000", "MANPAGER": "cat"]
        ).stdout
        let flat = page.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for command in commands {
            let help = try w.run(["help", command]).stdout
            XCTAssertTrue(flat.contains(" \(command) vaultaire \(command)"), "section for \(command)")
            for line in help.split(separator: "\n") where line.hasPrefix("  -") {
                let words = line.split(separator: " ", omittingEmptySubsequences: true)
                let flag = String(words.first { $0.hasPrefix("--") } ?? "")
                guard flag != "--help" else { continue }
                let text = line.split(separator: " ").drop { !$0.hasPrefix("--") }.dropFirst().drop {
                    $0.hasPrefix("<")
                }.joined(separator: " ")
                XCTAssertTrue(flat.contains(flag), "\(command) \(flag)")
                XCTAssertTrue(flat.contains(text), "\(command) \(flag): \(text)")
            }
        }
        for code in ["9", "12", "21", "64"] {
            XCTAssertTrue(flat.contains("EXIT STATUS") && flat.contains(" \(code) "), code)
        }
    }

    /// The overview names every command this test knows, and says nothing twice.
    func testOverviewListsEachCommandOnce() throws {
        let lines = try w.run(["help"]).stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        // A line's words before any parenthesis: two usage lines for the same form differ only after it.
        let heads = lines.map {
            String($0.split(separator: "(", maxSplits: 1).first ?? "").trimmingCharacters(in: .whitespaces)
        }
        XCTAssertEqual(heads.count, Set(heads).count, "a line printed twice: \(heads)")
        for command in commands {
            XCTAssertEqual(lines.filter { $0.hasPrefix(command + " ") }.count, 1, "overview line for \(command)")
        }
    }

    /// README's exit-code table lists the codes the man page lists.
    func testReadmeExitCodesMatch() throws {
        let readme = try String(contentsOfFile: DocumentationTests.repository + "/README.md", encoding: .utf8)
        let rows = readme.split(separator: "\n").filter {
            $0.range(of: #"^\| [0-9]+ \|"#, options: .regularExpression) != nil
        }
        let readmeCodes = rows.map { $0.split(separator: "|")[0].trimmingCharacters(in: .whitespaces) }
        let page = try String(contentsOfFile: try generate("man"), encoding: .utf8)
        let section = page.components(separatedBy: ".SH EXIT STATUS")[1].components(separatedBy: ".SH ")[0]
        let manCodes = section.split(separator: "\n").filter { $0.hasPrefix("\\fB") }.map {
            String($0.dropFirst(3).dropLast(3))
        }
        XCTAssertEqual(readmeCodes, manCodes)
    }

    func testBashCompletion() throws {
        let script = try generate("bash")
        XCTAssertEqual(try tool("/bin/bash", ["-n", script]).status, 0)
        try FileManager.default.createDirectory(atPath: w.root + "/vault-dir", withIntermediateDirectories: true)
        func complete(_ words: String) throws -> [String] {
            let r = try tool(
                "/bin/bash",
                [
                    "-c",
                    """
                    source "$1"
                    COMP_WORDS=(\(words)); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
                    _vaultaire
                    printf '%s\\n' "${COMPREPLY[@]}"
                    """, "bash", script,
                ])
            XCTAssertEqual(r.stderr, "", words)
            return r.stdout.split(separator: "\n").map(String.init)
        }
        XCTAssertEqual(try complete("vaultaire mo"), ["mount"])
        XCTAssertEqual(try complete("vaultaire mount --pa"), ["--passphrase-file"])
        XCTAssertEqual(try complete("vaultaire mount --keychain ''"), ["secret-service", "file"])
        XCTAssertEqual(try complete("vaultaire ls '\(w.root)/vault-d'"), [w.root + "/vault-dir"])
        XCTAssertEqual(
            try complete("vaultaire mount --passphrase-file x '\(w.root)/vault-dir' '\(w.root)/vault-d'"),
            [w.root + "/vault-dir"])
        XCTAssertEqual(try complete("vaultaire help verif"), ["verify"])
        XCTAssertTrue(try complete("vaultaire mount -o ''").contains("passphrase-file="))
    }

    func testZshCompletionParses() throws {
        let script = try generate("zsh")
        let r = try tool("/usr/bin/zsh", ["-n", script])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(try String(contentsOfFile: script, encoding: .utf8).hasPrefix("#compdef vaultaire\n"))
    }

    func testFishCompletion() throws {
        let script = try generate("fish")
        let syntax = try tool("/usr/bin/fish", ["-n", script])
        XCTAssertEqual(syntax.status, 0, syntax.stderr)
        func complete(_ line: String) throws -> [String] {
            let r = try tool(
                "/usr/bin/fish", ["--no-config", "-c", "source $argv[1]; complete -C \"\(line)\"", script])
            XCTAssertEqual(r.stderr, "", line)
            return r.stdout.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }
        }
        XCTAssertEqual(try complete("vaultaire mo"), ["mount"])
        XCTAssertEqual(try complete("vaultaire mount --pa"), ["--passphrase-file"])
        XCTAssertEqual(Set(try complete("vaultaire mount --keychain ")), ["secret-service", "file"])
    }

    func testGenerateRefusesUnknownOutputs() throws {
        let r = try w.run(["__generate", "pdf"], expect: 64)
        XCTAssertTrue(r.stderr.hasPrefix("Error: usage: vaultaire __generate man|bash|zsh|fish"), r.stderr)
        XCTAssertFalse(try w.run(["--help"]).stdout.contains("__generate"), "hidden from the command list")
    }
}
