import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultSystem

/// A file created open (the kernel's CREATE) holds its blob header and its index record back until its
/// first write and its close, so that a small file costs one write to its blob and one journal record.
/// These tests pin down the order that keeps that safe: a header is on disk before any record naming
/// its blob, and a blob that lost even its header comes back as an empty file.
final class HeldBackCreateTests: XCTestCase {
    private func blobSize(_ v: UnlockedVault, _ id: UInt64) throws -> Int {
        try FileDescriptor(path: v.layout.blobPath(try v.attributes(id).blobID), flags: O_RDONLY).size()
    }

    func testHeaderAndRecordWaitForTheFirstWriteAndTheClose() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let before = v.generation
        let h = try v.create(in: Inode.rootID, name: "f.txt", permissions: 0o644, caller: .current)
        XCTAssertEqual(try blobSize(v, h.id), 0, "nothing on disk before the first write")
        XCTAssertEqual(v.generation, before, "no record before the close")

        let data = randomBytes(3000)
        _ = try data.withUnsafeBytes { try v.write(h, at: 0, from: $0) }
        try v.flush(h)
        XCTAssertEqual(
            try blobSize(v, h.id), FileBlob.v2HeaderSize + FileBlob.chunkOverhead + 3072,
            "header and padded chunk together")
        XCTAssertEqual(v.generation, before + 1, "create and close in one record")
        v.release(h)
        v.wipeAndRelease()  // a crash after close(2): what was closed is there

        let again = try tv.open()
        XCTAssertEqual(try again.readFile("/f.txt"), data)
        XCTAssertTrue(again.verify().isIntact)
        try again.close()
    }

    func testAnyOtherRecordTakesTheHeldBackHeaderAlong() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let before = v.generation
        let h = try v.create(in: Inode.rootID, name: "empty", permissions: 0o644, caller: .current)
        try v.makeNode(in: Inode.rootID, name: "d", kind: .directory, permissions: 0o755, caller: .current)
        XCTAssertEqual(v.generation, before + 1, "the create went out with the mkdir")
        XCTAssertEqual(try blobSize(v, h.id), FileBlob.v2HeaderSize, "its header went first")
        v.wipeAndRelease()  // a crash with the file still open and never written

        let again = try tv.open()
        XCTAssertEqual(try again.readFile("/empty"), [])
        XCTAssertEqual(try again.resolve("/d").kind, .directory)
        XCTAssertTrue(again.verify().isIntact)
        try again.close()
    }

    func testAJournaledCreateWhoseBlobStayedEmptyComesBackEmpty() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let h = try v.create(in: Inode.rootID, name: "lost", permissions: 0o644, caller: .current)
        _ = try randomBytes(5000).withUnsafeBytes { try v.write(h, at: 0, from: $0) }
        try v.flush(h)
        let path = v.layout.blobPath(try v.attributes(h.id).blobID)
        v.wipeAndRelease()
        // As after a power cut that kept the journal but none of the blob's writes.
        XCTAssertEqual(truncate(path, 0), 0)

        let again = try tv.open()
        let notices = again.notices.joined(separator: "\n")
        XCTAssertTrue(notices.contains("lost data written after its last fsync"), notices)
        XCTAssertEqual(try again.readFile("/lost"), [])
        XCTAssertTrue(again.verify().isIntact)
        try again.close()
        let quiet = try tv.open()
        XCTAssertEqual(quiet.notices, [], "repaired once, quiet afterwards")
        try quiet.close()
    }
}
