import Glibc
import XCTest

@testable import VaultFS
@testable import VaultSystem

/// The background remover of deleted files' blobs: everything queued goes, `drain` waits for it,
/// small batches are not stranded, and the thread ends when idle and starts again on new work.
final class BlobReaperTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = "/tmp/vaultaire-reaper-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileSystem.makeDirectories(directory)
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    private func makeFiles(_ count: Int, prefix: String) throws -> [AnchoredPath] {
        let dir = try DirectoryDescriptor(path: directory)
        return try (0..<count).map { i in
            let file = dir.file("\(prefix)\(i)")
            try file.replace(with: [UInt8(i & 0xff)])
            return file
        }
    }

    private func remaining(_ files: [AnchoredPath]) -> [AnchoredPath] { files.filter { FileSystem.exists($0.path) } }

    func testDrainWaitsForEverythingQueuedFromManyThreads() throws {
        let reaper = BlobReaper(gatherMilliseconds: 50, lingerMilliseconds: 200, batchSize: 64)
        let paths = try makeFiles(2000, prefix: "b")
        let missing = try DirectoryDescriptor(path: directory).file("never-existed")  // a thumbnail that was never made
        DispatchQueue.concurrentPerform(iterations: 4) { part in
            for (i, path) in paths.enumerated() where i % 4 == part { reaper.remove([path, missing]) }
        }
        reaper.drain()
        XCTAssertEqual(remaining(paths).count, 0, "drain returned with blobs still on disk")
    }

    func testASmallBatchGoesWithoutDrain() throws {
        let reaper = BlobReaper(gatherMilliseconds: 20, lingerMilliseconds: 5000, batchSize: 256)
        let paths = try makeFiles(3, prefix: "s")
        reaper.remove(paths)
        var waited = 0
        while !remaining(paths).isEmpty && waited < 5000 {
            usleep(10_000)
            waited += 10
        }
        XCTAssertEqual(remaining(paths).count, 0, "three queued blobs still there after 5 s without a drain")
        XCTAssertTrue(reaper.isRunning, "the thread lingers for more work")
    }

    func testThreadEndsWhenIdleAndRestartsOnNewWork() throws {
        let reaper = BlobReaper(gatherMilliseconds: 5, lingerMilliseconds: 50, batchSize: 256)
        let first = try makeFiles(10, prefix: "x")
        reaper.remove(first)
        reaper.drain()
        XCTAssertEqual(remaining(first).count, 0)
        var waited = 0
        while reaper.isRunning && waited < 5000 {
            usleep(10_000)
            waited += 10
        }
        XCTAssertFalse(reaper.isRunning, "the thread should end after lingering 50 ms without work")
        let second = try makeFiles(10, prefix: "y")
        reaper.remove(second)
        XCTAssertTrue(reaper.isRunning)
        reaper.drain()
        XCTAssertEqual(remaining(second).count, 0, "work queued after the thread ended was not removed")
    }
}
