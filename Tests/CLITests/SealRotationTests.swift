import Foundation
import XCTest

/// A content key is replaced once it has made its seal budget (issue 22, finding 7): the lock after
/// that gives the file a new blob under a new key, and every byte survives. The budget is lowered here
/// with VAULTAIRE_TEST_SEAL_LIMIT, which can only make keys rotate sooner.
final class SealRotationTests: XCTestCase {
    func blobNames(_ vault: String) throws -> Set<String> {
        var names: Set<String> = []
        for sub in try FileManager.default.contentsOfDirectory(atPath: vault + "/blobs") {
            for name in try FileManager.default.contentsOfDirectory(atPath: vault + "/blobs/" + sub) {
                names.insert(sub + name)
            }
        }
        return names
    }

    func testAKeyPastItsBudgetIsReplacedAtTheNextLock() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        let payload = (0..<70_000).map { _ in UInt8.random(in: 0...255) }
        let src = w.root + "/payload.bin"
        try Data(payload).write(to: URL(fileURLWithPath: src))
        let small = w.file("small", "under the budget\n")
        try w.run(["put", vault, src, "/big.bin", "--passphrase-file", pw])  // 18 chunks: 18 seals
        try w.run(["put", vault, small, "/small.txt", "--passphrase-file", pw])  // 1 seal
        let before = try blobNames(vault)
        XCTAssertEqual(before.count, 2)
        // Without the lowered budget nothing rotates.
        try w.run(["mkdir", vault, "/d1", "--passphrase-file", pw])
        XCTAssertEqual(try blobNames(vault), before)
        try w.run(["mkdir", vault, "/d2", "--passphrase-file", pw], environment: ["VAULTAIRE_TEST_SEAL_LIMIT": "8"])
        let after = try blobNames(vault)
        XCTAssertEqual(after.count, 2)
        XCTAssertEqual(after.intersection(before).count, 1, "the big file's blob is new, the small one's kept")
        try w.run(["get", vault, "/big.bin", w.root + "/back.bin", "--passphrase-file", pw])
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: w.root + "/back.bin")), Data(payload))
        let verify = try w.run(["verify", vault, "--passphrase-file", pw])
        XCTAssertTrue(verify.stdout.contains("all intact"), verify.stdout)
    }
}
