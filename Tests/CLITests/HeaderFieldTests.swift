import Foundation
import XCTest

/// Header fields are checked before use (issue 22, finding 4): a pattern grid of 255 columns used to
/// trap (exit 132, "Fatal error" and a stack dump) before anything was authenticated.
final class HeaderFieldTests: XCTestCase {
    func testAnOutOfRangePatternGridIsDamageNotACrash() throws {
        let w = try CLIWorld()
        let pattern = w.file("pattern", "a1-b2-c3-d4\n")
        let vault = w.root + "/pv"
        try w.run([
            "init", vault, "--pattern", "--passphrase-file", pattern, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/phrase",
        ])
        let headerPath = vault + "/vault.header"
        let original = try Data(contentsOf: URL(fileURLWithPath: headerPath))
        // The first slot's pattern rows and columns (docs/FORMAT.md, version 2: offsets 122 and 123).
        for (offset, value) in [(123, UInt8(0xFF)), (122, 0xFF), (123, 0), (122, 1)] {
            var header = original
            header[offset] = value
            try header.write(to: URL(fileURLWithPath: headerPath))
            for command in [
                ["ls", vault, "--passphrase-file", pattern], ["info", vault],
                ["verify", vault, "--passphrase-file", pattern],
            ] {
                let r = try w.run(command, expect: 13)
                XCTAssertTrue(r.stderr.hasPrefix("Error: vault data malformed"), r.stderr)
                XCTAssertFalse(r.stderr.contains("Fatal error"), r.stderr)
            }
        }
        try original.write(to: URL(fileURLWithPath: headerPath))
        try w.run(["ls", vault, "--passphrase-file", pattern])
    }
}
