import Foundation
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultKeychain
@testable import VaultSystem

/// Index version 2, blob layout 2 and its padding, holes in the record, and the v1 index's migration.
final class FormatV2Tests: XCTestCase {
    /// The padding rule as FORMAT.md states it, at its bucket edges.
    func testPaddedLengthsFollowTheDocumentedRule() {
        let c = 4096
        let cases: [(Int, Int)] = [
            (0, 0), (1, 256), (255, 256), (256, 256), (257, 272), (4095, 4096), (4096, 4096), (4097, 4352),
            (3000, 3072), (8191, 8192), (8193, 8704), (100_000, 100_352), (1 << 20, 1 << 20),
        ]
        for (size, padded) in cases {
            XCTAssertEqual(FileBlob.paddedLength(size: size, chunkSize: c, layout: 2), padded, "size \(size)")
        }
        XCTAssertEqual(FileBlob.paddedLength(size: 1, chunkSize: c, layout: 1), 4096)
    }

    /// Every padded length around block, chunk and bucket edges round-trips through the engine, and the
    /// blob is exactly header + slots + padded last chunk long; a 1-byte file fits one host block.
    func testFilesAroundEveryEdgeRoundTripAtTheirDocumentedLength() throws {
        let tv = try TestVault()
        var v = try tv.open()
        let sizes = [0, 1, 255, 256, 257, 272, 273, 3976, 3977, 4095, 4096, 4097, 8191, 8192, 8193, 12289, 70_000]
        var data: [Int: [UInt8]] = [:]
        for s in sizes {
            data[s] = randomBytes(s)
            try v.writeFile("/f\(s)", data[s]!)
        }
        try v.close()
        v = try tv.open()
        for s in sizes {
            XCTAssertEqual(try v.readFile("/f\(s)"), data[s]!, "size \(s)")
            let node = try v.resolve("/f\(s)")
            XCTAssertEqual(node.blobLayout, 2)
            let n = (s + 4095) / 4096
            let expected =
                s == 0
                ? FileBlob.v2HeaderSize
                : FileBlob.v2HeaderSize + n * FileBlob.chunkOverhead
                    + FileBlob.paddedLength(size: s, chunkSize: 4096, layout: 2)
            let fd = try FileDescriptor(path: v.layout.blobPath(node.blobID), flags: O_RDONLY)
            XCTAssertEqual(try fd.size(), expected, "blob length of a \(s)-byte file")
        }
        var st = stat()
        XCTAssertEqual(stat(v.layout.blobPath(try v.resolve("/f1").blobID), &st), 0)
        XCTAssertLessThanOrEqual(st.st_blocks * 512, 4096, "a 1-byte file takes one 4 KiB block")
        XCTAssertTrue(v.verify().isIntact)
        try v.close()
    }

    /// The padded tail cut short or extended is named by verify, and no read returns other plaintext.
    func testACutOrExtendedPaddedTailIsDetected() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let data = randomBytes(5000)
        try v.writeFile("/t", data)
        let path = v.layout.blobPath(try v.resolve("/t").blobID)
        try v.close()
        let original = try FileSystem.readFile(path)
        for (name, altered) in [
            ("cut by 1", Array(original.dropLast(1))), ("cut by 100", Array(original.dropLast(100))),
            ("extended by 1", original + [0]), ("extended by a block", original + [UInt8](repeating: 0, count: 4096)),
        ] {
            try FileSystem.replaceFile(path, with: altered)
            let r = try tv.open(readOnly: true)
            XCTAssertEqual(r.verify().damaged.map(\.path), ["/t"], name)
            if let got = try? r.readFile("/t") { XCTAssertEqual(got, data, name) }
            try r.close()
        }
        try FileSystem.replaceFile(path, with: original)
        XCTAssertTrue(try tv.open(readOnly: true).verify().isIntact)
    }

    /// A hole the record names reads as zeros; zeroing a stored chunk (an attacker "punching" one)
    /// fails, since the record says data is there.
    func testHolesComeFromTheRecordNotFromTheBlob() throws {
        let tv = try TestVault()
        var v = try tv.open()
        try v.writeFile("/s", randomBytes(10))
        let node = try v.resolve("/s")
        try v.setSize(node.id, to: 3 << 30)
        let written = randomBytes(4096)
        let h = try v.open(node.id, write: true)
        _ = try written.withUnsafeBytes { try v.write(h, at: 1 << 30, from: $0) }
        v.release(h)
        try v.close()
        v = try tv.open()
        let again = try v.resolve("/s")
        XCTAssertEqual(again.size, 3 << 30)
        XCTAssertEqual(again.holes.count, 2)
        var st = stat()
        let path = v.layout.blobPath(again.blobID)
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertLessThan(st.st_blocks * 512, 1 << 20, "the blob stays sparse")
        let r = try v.open(again.id, write: false)
        var buf = [UInt8](repeating: 1, count: 4096)
        _ = try buf.withUnsafeMutableBytes { try v.read(r, at: 2 << 30, into: $0) }
        XCTAssertEqual(buf, [UInt8](repeating: 0, count: 4096), "a hole reads as zeros")
        _ = try buf.withUnsafeMutableBytes { try v.read(r, at: 1 << 30, into: $0) }
        XCTAssertEqual(buf, written)
        v.release(r)
        XCTAssertTrue(v.verify().isIntact)
        try v.close()
        // Zero the stored chunk at 1 GiB: the record says data, so it must fail.
        let fd = try FileDescriptor(path: path, flags: O_RDWR)
        let slot = 4096 + FileBlob.chunkOverhead
        try fd.write([UInt8](repeating: 0, count: slot), at: FileBlob.v2HeaderSize + (1 << 30) / 4096 * slot)
        let ro = try tv.open(readOnly: true)
        XCTAssertEqual(ro.verify().damaged.map(\.path), ["/s"])
        try ro.close()
    }

    /// A writable open of a version-1 index writes a version-2 snapshot and journal; the v1 blobs in
    /// it stay readable and writable in place.
    func testAVersion1IndexIsMigratedAtTheFirstWritableOpen() throws {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        let fixtures = try XCTUnwrap(Bundle.module.url(forResource: "Fixtures", withExtension: nil)).path
        let work = "/tmp/vaultaire-migrate-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = system("rm -rf '\(work)'") }
        XCTAssertEqual(system("mkdir -p '\(work)/keychain' && cp -a '\(fixtures)/vault-v1' '\(work)/vault'"), 0)
        chmod(work + "/keychain", 0o700)
        let salt = try Data(contentsOf: URL(fileURLWithPath: fixtures + "/vault-v1.device-salt"))
        _ = FileManager.default.createFile(
            atPath: work + "/keychain/device-salt", contents: salt, attributes: [.posixPermissions: 0o600])
        let keychain = Keychain(backend: FileKeychain(directory: work + "/keychain"))
        let path = work + "/vault"
        func open(readOnly: Bool) throws -> UnlockedVault {
            let master = try VaultAccess.unwrapMasterKey(
                at: path, credential: .passphrase(SecureBytes(copying: Array("fixture passphrase v1".utf8))),
                keychain: keychain)
            return try VaultAccess.open(at: path, master: master, keychain: nil, readOnly: readOnly)
        }
        let before = try open(readOnly: true)
        XCTAssertEqual(before.indexFormat.version, 1)
        try before.close()
        let v = try open(readOnly: false)
        XCTAssertEqual(v.indexFormat.version, 2, "migrated at the writable open")
        XCTAssertEqual(try v.resolve("/docs/hello.txt").blobLayout, 1)
        let node = try v.resolve("/docs/hello.txt")
        let h = try v.open(node.id, write: true)
        let extra = Array("more\n".utf8)
        _ = try extra.withUnsafeBytes { try v.write(h, at: Int(node.size), from: $0) }
        v.release(h)
        try v.writeFile("/new.txt", Array("v2".utf8))
        try v.compactIndexNow()
        try v.close()
        let snapshot = try FileSystem.readFile(path + "/index/snapshot")
        XCTAssertEqual(snapshot[4], 2, "snapshot version 2")
        let after = try open(readOnly: true)
        XCTAssertEqual(
            String(decoding: try after.readFile("/docs/hello.txt"), as: UTF8.self),
            "Hello from format version 1.\nmore\n")
        XCTAssertEqual(try after.resolve("/docs/hello.txt").blobLayout, 1, "a v1 blob is written in place")
        XCTAssertEqual(try after.resolve("/new.txt").blobLayout, 2)
        XCTAssertTrue(after.verify().isIntact)
        try after.close()

        // The explicit rewrite: every v1 blob into layout 2, content unchanged, old blobs gone.
        let w = try open(readOnly: false)
        let oldBlob = try w.resolve("/forty-thousand-v.txt").blobID
        var calls = 0
        let rewritten = try w.rewriteBlobs { _, _ in calls += 1 }
        XCTAssertGreaterThan(rewritten, 0)
        XCTAssertEqual(calls, rewritten, "progress once per file")
        try w.close()
        let final = try open(readOnly: true)
        XCTAssertEqual(try final.readFile("/forty-thousand-v.txt"), [UInt8](repeating: UInt8(ascii: "v"), count: 40000))
        XCTAssertEqual(
            String(decoding: try final.readFile("/docs/hello.txt"), as: UTF8.self),
            "Hello from format version 1.\nmore\n")
        for id in final.meta.withLock({ $0.index.inodes.values.filter { $0.kind == .file }.map(\.blobLayout) }) {
            XCTAssertEqual(id, 2)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: final.layout.blobPath(oldBlob)), "old blob reaped")
        let report = final.verify()
        XCTAssertTrue(report.isIntact && report.strayBlobs.isEmpty, "\(report.damaged) \(report.strayBlobs.count)")
        try final.close()
    }
}
