import Foundation
import XCTest

/// Progress on a terminal (issue 26.5): put, get and verify draw one line on standard error — done,
/// total, rate, time left — redrawn in place, only when standard error is a terminal (script(1)
/// gives the command one here), and never with --quiet.
final class ProgressTests: XCTestCase {
    var w: CLIWorld!
    var vault: String!
    var pw: String!
    var big: String!

    override func setUpWithError() throws {
        w = try CLIWorld()
        pw = w.file("pw", "progress test passphrase\n")
        vault = w.root + "/vault"
        try w.run([
            "init", vault, "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
            "--recovery-phrase-out", w.root + "/phrase",
        ])
        big = w.root + "/big.bin"
        try Data((0..<(20 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }).write(
            to: URL(fileURLWithPath: big))
    }

    override func tearDown() { w = nil }

    /// Runs vaultaire with a terminal as its standard input, output and error; returns what the
    /// terminal showed.
    func onTerminal(_ args: [String], after pipe: String = "") throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        p.arguments = ["-qfec", pipe + ([w.binary] + args).map { "'\($0)'" }.joined(separator: " "), "/dev/null"]
        p.environment = w.environment
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, String(decoding: o, as: UTF8.self))
        return String(decoding: o, as: UTF8.self)
    }

    func testPutGetAndVerifyDrawOneLineOnATerminal() throws {
        let put = try onTerminal(["put", vault, big, "/big.bin", "--passphrase-file", pw])
        XCTAssertTrue(put.contains("\r20.0 MiB of 20.0 MiB (100%)"), put)
        XCTAssertTrue(put.contains("\u{1B}[K"), "each redraw clears the rest of the line")
        XCTAssertFalse(put.contains("\n\r"), "redrawn in place, not line after line")
        let get = try onTerminal(["get", vault, "/big.bin", w.root + "/back.bin", "--passphrase-file", pw])
        XCTAssertTrue(get.contains("20.0 MiB of 20.0 MiB (100%)"), get)
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: w.root + "/back.bin")),
            try Data(contentsOf: URL(fileURLWithPath: big)))
        let verify = try onTerminal(["verify", vault, "--passphrase-file", pw])
        XCTAssertTrue(verify.contains("1 of 1 files (100%)"), verify)
        XCTAssertTrue(verify.contains("all intact"), verify)
    }

    func testQuietDrawsNothing() throws {
        let put = try onTerminal(["put", vault, big, "/big.bin", "--passphrase-file", pw, "--quiet"])
        XCTAssertFalse(put.contains("MiB"), put)
        let get = try onTerminal(["get", vault, "/big.bin", w.root + "/back.bin", "--passphrase-file", pw, "-q"])
        XCTAssertFalse(get.contains("MiB"), get)
        let verify = try onTerminal(["verify", vault, "--passphrase-file", pw, "--quiet"])
        XCTAssertFalse(verify.contains("files ("), verify)
    }

    func testNothingWhenStandardErrorIsNotATerminal() throws {
        let put = try w.run(["put", vault, big, "/big.bin", "--passphrase-file", pw])
        XCTAssertEqual(put.errorLines, [])
        let get = try w.run(["get", vault, "/big.bin", w.root + "/back.bin", "--passphrase-file", pw])
        XCTAssertEqual(get.errorLines, [])
        let verify = try w.run(["verify", vault, "--passphrase-file", pw])
        XCTAssertEqual(verify.errorLines, [])
    }

    func testAPipeOfUnknownLengthShowsBytesWithoutATotal() throws {
        let put = try onTerminal(
            ["put", vault, "-", "/from-stdin", "--passphrase-file", pw], after: "head -c 3145728 /dev/zero | ")
        XCTAssertTrue(put.contains("\r3.0 MiB"), put)
        XCTAssertFalse(put.contains(" of "), put)
    }
}
