import XCTest

@testable import VaultCrypto

/// A failing OpenSSL hash or HMAC must throw, never hand back a buffer of zeros (issue 22, finding 6).
final class FailClosedTests: XCTestCase {
    func testAnUnavailableDigestThrows() {
        XCTAssertThrowsError(try Digest.digest([1, 2, 3], algorithm: "NO-SUCH-DIGEST", length: 32)) {
            guard case CryptoError.openSSLFailure = $0 else { return XCTFail("\($0)") }
        }
    }

    func testAnUnavailableHMACThrows() throws {
        let key = try SecureBytes(randomCount: 32)
        XCTAssertThrowsError(try Digest.hmac(key: key, message: [1, 2, 3], algorithm: "NO-SUCH-DIGEST", length: 64)) {
            guard case CryptoError.openSSLFailure = $0 else { return XCTFail("\($0)") }
        }
    }

    /// The checked paths still give the published values (FIPS 180-2 "abc").
    func testTheCheckedDigestsStillMatchTheStandard() throws {
        XCTAssertEqual(
            try Digest.sha256(Array("abc".utf8)).map { String(format: "%02x", $0) }.joined(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(
            try Digest.sha512(Array("abc".utf8)).prefix(8).map { String(format: "%02x", $0) }.joined(),
            "ddaf35a193617aba")
    }
}
