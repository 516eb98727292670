import Foundation
import TestSupport
import XCTest

/// The C transport's own checks (Tests/RingBoundsTests/main.c, built as `ring-bounds-tests`): the
/// INIT negotiation and set-ID flags of CFuseWire, including the start-up order of KILLPRIV_V2, and
/// the bounds of CFuseRing's entries — lengths, offsets, malformed headers, replies past the buffer.
final class RingBoundsTests: XCTestCase {
    func testWireAndRingEntryBoundsInC() throws {
        let binary = URL(fileURLWithPath: ProcessRunner.vaultaireBinary).deletingLastPathComponent()
            .appendingPathComponent("ring-bounds-tests").path
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: binary), "\(binary) is built with the tests")
        let scratch = NSTemporaryDirectory()
        let result = try ProcessRunner(environment: [:], scratch: scratch).run(binary, [])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertTrue(result.stdout.contains(", 0 failed"), result.stdout)
        print(result.stdout, terminator: "")
    }
}
