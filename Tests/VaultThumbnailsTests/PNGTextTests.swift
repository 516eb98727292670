import XCTest

@testable import VaultThumbnails

final class PNGTextTests: XCTestCase {
    /// The CRC of the PNG specification's own example: IEND with no data is AE 42 60 82.
    func testChunkCRCMatchesTheSpecification() {
        XCTAssertEqual(PNGText.chunk(type: Array("IEND".utf8), data: []).suffix(4), [0xAE, 0x42, 0x60, 0x82])
    }
}
