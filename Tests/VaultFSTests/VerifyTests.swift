import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultSystem

/// `verify` checks files on two threads: what it reports is what one thread would — every damaged
/// file, in inode order, every chunk counted — and its progress comes on the calling thread.
final class VerifyTests: XCTestCase {
    /// Forty files of 0–145 chunks (enough work that both threads take files); the last byte (the
    /// final chunk's tag) flipped in the blobs of `damaged`.
    func vault(damaging damaged: [Int]) throws -> (TestVault, chunks: Int) {
        let tv = try TestVault()
        let v = try tv.open()
        var chunks = 0
        for i in 0..<40 {
            let full = i % 10 * 16
            try v.writeFile("/f\(i)", [UInt8](repeating: UInt8(i), count: full == 0 ? 0 : full * 4096 + 7))
            chunks += full == 0 ? 0 : full + 1
        }
        let blobs = try damaged.map { v.layout.blobPath(try v.resolve("/f\($0)").blobID) }
        try v.close()
        for blob in blobs {
            let fd = try FileDescriptor(path: blob, flags: O_RDWR)
            var byte = [UInt8](repeating: 0, count: 1)
            let end = try fd.size() - 1
            _ = try byte.withUnsafeMutableBytes { try fd.read(into: $0, at: end) }
            byte[0] ^= 0x01
            try fd.write(byte, at: end)
        }
        return (tv, chunks)
    }

    func testAnIntactVaultHasEveryFileAndChunkCounted() throws {
        let (tv, chunks) = try vault(damaging: [])
        let report = try tv.open(readOnly: true).verify()
        XCTAssertEqual([report.filesChecked, report.chunksChecked, report.damaged.count], [40, chunks, 0])
    }

    func testDamagedFilesAreAllReportedInInodeOrder() throws {
        let (tv, _) = try vault(damaging: [39, 1, 21])
        let report = try tv.open(readOnly: true).verify()
        XCTAssertEqual(report.damaged.map(\.path), ["/f1", "/f21", "/f39"])
    }

    func testProgressComesOnTheCallingThreadAndReachesTheEnd() throws {
        let (tv, _) = try vault(damaging: [])
        let caller = pthread_self()
        var seen: [Int] = []
        var elsewhere = 0
        _ = try tv.open(readOnly: true).verify { done, total in
            if pthread_equal(pthread_self(), caller) == 0 { elsewhere += 1 }
            seen.append(done)
            XCTAssertEqual(total, 40)
        }
        XCTAssertEqual(elsewhere, 0, "progress called from another thread")
        XCTAssertEqual(seen, seen.sorted(), "progress went backwards")
        XCTAssertEqual(seen.last, 40)
    }
}
