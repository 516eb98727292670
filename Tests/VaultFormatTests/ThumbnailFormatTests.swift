import Foundation
import VaultCrypto
import XCTest

@testable import VaultFormat

/// The sealed thumbnail file (docs/FORMAT.md "Thumbnails"): version 2 written, version 1 still read,
/// bound to its vault, inode and blob, and every byte authenticated.
final class ThumbnailFormatTests: XCTestCase {
    let key = SecureBytes(copying: [UInt8](repeating: 7, count: 32))
    let vaultID = [UInt8](repeating: 1, count: 16)
    let blobID = [UInt8](repeating: 2, count: 16)
    let set = ThumbnailSet(contentVersion: 3, fileSize: 1234, normal: [1, 2, 3], large: [4, 5, 6, 7])

    func testVersion2RoundTripsBothSizesAndTheContentVersion() throws {
        let sealed = try Thumbnail.seal(set, key: key, vaultID: vaultID, inodeID: 9, blobID: blobID)
        XCTAssertEqual(Array(sealed[0..<5]), Array("VLTT".utf8) + [2])
        let opened = try Thumbnail.open(sealed, key: key, vaultID: vaultID, inodeID: 9, blobID: blobID)
        XCTAssertEqual(opened, set)
        XCTAssertTrue(opened.isCurrent(contentVersion: 3, size: 1234))
        XCTAssertFalse(opened.isCurrent(contentVersion: 4, size: 1234))
        XCTAssertFalse(opened.isCurrent(contentVersion: 3, size: 1))
    }

    func testEveryByteIsAuthenticatedAndTheFileIsBoundToItsFile() throws {
        let sealed = try Thumbnail.seal(set, key: key, vaultID: vaultID, inodeID: 9, blobID: blobID)
        for i in 4..<sealed.count {
            var bad = sealed
            bad[i] ^= 0x01
            XCTAssertThrowsError(try Thumbnail.open(bad, key: key, vaultID: vaultID, inodeID: 9, blobID: blobID)) {
                guard case FormatError.damaged = $0 else { return XCTFail("byte \(i): \($0)") }
            }
        }
        XCTAssertThrowsError(try Thumbnail.open(sealed, key: key, vaultID: vaultID, inodeID: 8, blobID: blobID))
        var otherBlob = blobID
        otherBlob[0] ^= 1
        XCTAssertThrowsError(try Thumbnail.open(sealed, key: key, vaultID: vaultID, inodeID: 9, blobID: otherBlob))
        XCTAssertThrowsError(
            try Thumbnail.open(sealed, key: key, vaultID: [UInt8](repeating: 0, count: 16), inodeID: 9, blobID: blobID))
    }

    func testVersion1IsStillRead() throws {
        let v1 = try Thumbnail.sealV1([9, 9], key: key, vaultID: vaultID, inodeID: 9, blobID: blobID)
        XCTAssertEqual(v1[4], 1)
        let opened = try Thumbnail.open(v1, key: key, vaultID: vaultID, inodeID: 9, blobID: blobID)
        XCTAssertEqual(opened, ThumbnailSet(contentVersion: nil, fileSize: nil, normal: [9, 9], large: [9, 9]))
    }

    /// Each file has a key of its own: one file's key opens no other file's thumbnails.
    func testPerFileKeysDiffer() throws {
        var otherBlob = blobID
        otherBlob[15] ^= 1
        let a = try Thumbnail.fileKey(thumbnailKey: key, blobID: blobID)
        let b = try Thumbnail.fileKey(thumbnailKey: key, blobID: otherBlob)
        XCTAssertEqual(a.count, 32)
        XCTAssertFalse(a.constantTimeEquals(b))
        XCTAssertFalse(a.constantTimeEquals(key))
    }

    /// docs/FORMAT.md "Thumbnails", test vectors.
    func testVector() throws {
        let fileKey = try Thumbnail.fileKey(thumbnailKey: key, blobID: blobID)
        XCTAssertEqual(
            fileKey.withUnsafeBytes { Array($0) }.map { String(format: "%02x", $0) }.joined(),
            "95f1d4ee314d428a89c9efe1ea664613b9fd5d6db4ab02ad84be518a4c53e6be")
        XCTAssertEqual(
            try Digest.md5(Array("photo.jpg".utf8)).map { String(format: "%02x", $0) }.joined(),
            "72acded3acd45e4c8b6ed680854b8ab1")
    }
}
