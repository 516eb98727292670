import Foundation
import XCTest

final class VersionTests: XCTestCase {
    func testVersionNamesTheProgramAndTheFormatVersions() throws {
        let w = try CLIWorld()
        let long = try w.run(["--version"])
        let command = try w.run(["version"])
        XCTAssertEqual(long.stdout, command.stdout)
        let lines = long.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, long.stdout)
        XCTAssertNotNil(
            lines[0].range(of: #"^vaultaire [0-9]+\.[0-9]+\.[0-9]+$"#, options: .regularExpression), lines[0])
        XCTAssertEqual(lines[1], "vault format: reads versions 1, 2, writes version 2")
        XCTAssertEqual(long.stderr, "")
        // A vault this build made says the same version.
        let pw = w.file("pw", "version test passphrase\n")
        try w.run([
            "init", w.root + "/v", "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
            "--recovery-phrase-out", w.root + "/phrase",
        ])
        XCTAssertTrue(try w.run(["info", w.root + "/v"]).stdout.contains("Format version:      2"))
    }
}
