import Foundation
import XCTest

/// Many `vaultaire init` at once on an empty file keychain (issue 22, finding 3): the device salt is
/// created first-writer-wins, so every vault made opens afterwards. Before, concurrent creators
/// overwrote each other's salt (their vaults then exited 16) or lost a shared temporary (exit 15).
final class DeviceSaltRaceTests: XCTestCase {
    func testConcurrentInitsOnAnEmptyFileKeychainAllOpen() throws {
        let w = try CLIWorld()
        let pw = w.file("pw", "correct horse battery\n")
        for round in 0..<3 {
            w.environment["XDG_DATA_HOME"] = w.root + "/data-\(round)"  // an empty keychain each round
            let count = 8
            let started = try (0..<count).map { i in
                try w.start([
                    "init", w.root + "/v\(round)-\(i)", "--passphrase-file", pw, "--kdf-iterations", "1000",
                    "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/p\(round)-\(i)",
                ])
            }
            for (i, (p, _, err)) in started.enumerated() {
                p.waitUntilExit()
                let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                XCTAssertEqual(p.terminationStatus, 0, "round \(round), init \(i): \(message)")
            }
            for i in 0..<count {
                try w.run(["ls", w.root + "/v\(round)-\(i)", "--passphrase-file", pw])
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: w.root + "/data-\(round)/vaultaire/keychain")
            XCTAssertEqual(left, ["device-salt"], "no temporaries left behind")
        }
    }
}
