import Foundation
import XCTest

@testable import VaultThumbnails

final class PNGTextTests: XCTestCase {
    /// The CRC of the PNG specification's own example: IEND with no data is AE 42 60 82.
    func testChunkCRCMatchesTheSpecification() {
        XCTAssertEqual(PNGText.chunk(type: Array("IEND".utf8), data: []).suffix(4), [0xAE, 0x42, 0x60, 0x82])
    }
}

final class ImageMakingTests: XCTestCase {
    func testFormatsAreToldByContentNotName() {
        func kind(_ bytes: [UInt8]) -> ImageKind? { bytes.withUnsafeBytes { ImageKind.sniff($0) } }
        XCTAssertEqual(kind([0xFF, 0xD8, 0xFF, 0xE0]), .jpeg)
        XCTAssertEqual(kind([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), .png)
        XCTAssertEqual(kind(Array("GIF89a".utf8)), .gif)
        XCTAssertEqual(kind(Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBP".utf8)), .webp)
        XCTAssertEqual(kind([0x49, 0x49, 0x2A, 0x00]), .tiff)
        XCTAssertEqual(kind([0, 0, 0, 24] + Array("ftypheic".utf8)), .heif)
        XCTAssertNil(kind(Array("%PDF-1.7".utf8)))
        XCTAssertNil(kind([0xFF, 0xD8]))
    }

    /// A 600×400 PNG made by the vips command: both sizes come out at their longest side, as PNGs
    /// libvips reads back, and text chunks inserted into one parse with valid CRCs.
    func testMakesBothSizesAndCarriesTextChunks() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/vips") else {
            throw XCTSkip("the vips command (libvips-tools) is not installed")
        }
        let dir = NSTemporaryDirectory() + "vaultaire-thumbs-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for args in [
            ["sines", dir + "/s.v", "600", "400"], ["linear", dir + "/s.v", dir + "/a.png", "127", "128", "--uchar"],
        ] {
            let p = try Process.run(URL(fileURLWithPath: "/usr/bin/vips"), arguments: args)
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, "vips \(args)")
        }
        let png = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/a.png")))
        let made = try png.withUnsafeBytes { try ThumbnailMaker.make($0) }
        let large = try made.large.withUnsafeBytes { try ThumbnailMaker.probe($0) }
        let normal = try made.normal.withUnsafeBytes { try ThumbnailMaker.probe($0) }
        XCTAssertEqual([large.kind, normal.kind], [.png, .png])
        // The normal size is made from the large one: 171 / 2 rounds to 86.
        XCTAssertEqual([large.width, large.height, normal.width, normal.height], [256, 171, 128, 86])
        let tagged = try XCTUnwrap(
            PNGText.inserting([("Thumb::URI", "a.png"), ("Thumb::Size", "67")], into: made.normal))
        XCTAssertEqual(
            PNGText.texts(of: tagged).map { "\($0.key)=\($0.value)" }, ["Thumb::URI=a.png", "Thumb::Size=67"])
        XCTAssertNoThrow(try tagged.withUnsafeBytes { try ThumbnailMaker.make($0) })
        XCTAssertNil(PNGText.inserting([], into: [1, 2, 3]))
    }

    func testCorruptInputIsRefusedNotCrashed() {
        let junk: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0x5A, count: 5000)
        XCTAssertThrowsError(try junk.withUnsafeBytes { try ThumbnailMaker.make($0) }) {
            guard case ThumbnailError.undecodable = $0 else { return XCTFail("\($0)") }
        }
    }
}
