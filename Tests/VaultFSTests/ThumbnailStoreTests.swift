import Foundation
import Glibc
import VaultFormat
import VaultSystem
import XCTest

@testable import VaultFS

/// The engine's side of thumbnails: stored per file, told apart when stale, named by `verify` when
/// stale or orphaned, gone with the file, and the hook that tells the thumbnailer of written files.
final class ThumbnailStoreTests: XCTestCase {
    func testStaleAndOrphanedThumbnailsAreNamedByVerifyAndRepairRemovesOrphans() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.writeFile("/a.jpg", [1, 2, 3])
        let a = try v.resolve("/a.jpg")
        let current = ThumbnailSet(contentVersion: a.contentVersion, fileSize: a.size, normal: [1], large: [2])
        try v.setThumbnails(a.id, current)
        XCTAssertEqual(try v.thumbnails(a.id), current)
        XCTAssertFalse(v.verify().notices.contains { $0.contains("stale") })
        var stale = current
        stale.contentVersion = a.contentVersion &+ 7
        try v.setThumbnails(a.id, stale)
        XCTAssertTrue(v.verify().notices.contains { $0.contains("stale thumbnail of /a.jpg") }, "\(v.verify().notices)")
        // A thumbnail file no record names.
        let orphan = [UInt8](repeating: 0xAB, count: 16)
        let file = try v.layout.thumbnailFile(orphan)
        try v.layout.prepareParent(of: file)
        try file.replace(with: [1, 2, 3])
        let report = v.verify()
        XCTAssertEqual(report.orphanedThumbnails, [orphan])
        XCTAssertTrue(
            report.notices.contains { $0.contains("thumbs/ab/abababababababababababababab") }, "\(report.notices)")
        XCTAssertEqual(try v.removeStrayBlobs(report.orphanedThumbnails).removed, 1)
        XCTAssertFalse(try file.exists())
        try v.close()
    }

    func testWritersLastReleaseIsReportedAndReadersAreNot() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let seen = Guarded<[UInt64]>([])
        v.onContentChanged { change in seen.withLock { $0.append(change.id) } }
        try v.writeFile("/a.png", [9])
        let a = try v.resolve("/a.png")
        XCTAssertEqual(seen.withLock { $0 }, [a.id])
        _ = try v.readFile("/a.png")
        XCTAssertEqual(seen.withLock { $0 }, [a.id], "a read-only release reports nothing")
        try v.setSize(a.id, to: 0)
        XCTAssertEqual(seen.withLock { $0 }, [a.id, a.id], "truncate reports")
        try v.close()
    }

    /// The last release of a writer passes on what the engine has without reading: a small file's first
    /// bytes, still in its cache, and whether the file was created since it was opened (then no
    /// thumbnail can exist for it).
    func testTheLastReleaseCarriesTheFirstBytesAndWhetherTheFileIsNew() throws {
        struct Seen: Equatable {
            let id: UInt64
            let leadingBytes: [UInt8]?
            let mayHaveThumbnails: Bool
        }
        let tv = try TestVault()  // 4 KiB chunks
        let v = try tv.open()
        let seen = Guarded<[Seen]>([])
        v.onContentChanged { c in
            seen.withLock {
                $0.append(
                    Seen(
                        id: c.id, leadingBytes: c.leadingBytes.map { Array($0) }, mayHaveThumbnails: c.mayHaveThumbnails
                    ))
            }
        }
        func created(_ name: String) throws -> VaultFS.FileHandle {
            try v.create(in: Inode.rootID, name: name, permissions: 0o644, caller: .current)
        }
        let text = Array("a short text file".utf8)
        let a = try created("a.txt")
        _ = try text.withUnsafeBytes { try v.write(a, at: 0, from: $0) }
        v.release(a)
        let big = try created("big.bin")
        _ = try randomBytes(3 * 4096 + 100).withUnsafeBytes { try v.write(big, at: 0, from: $0) }
        v.release(big)
        let empty = try created("empty")
        v.release(empty)
        let long = randomBytes(1000)
        let again = try v.open(a.id, write: true)
        _ = try long.withUnsafeBytes { try v.write(again, at: 0, from: $0) }
        v.release(again)
        let shot = try created("shot.png")
        _ = try long.withUnsafeBytes { try v.write(shot, at: 0, from: $0) }
        try v.setThumbnail(shot.id, image: [1])
        v.release(shot)
        XCTAssertEqual(
            seen.withLock { $0 },
            [
                Seen(id: a.id, leadingBytes: text, mayHaveThumbnails: false),
                Seen(id: big.id, leadingBytes: nil, mayHaveThumbnails: false),
                Seen(id: empty.id, leadingBytes: [], mayHaveThumbnails: false),
                Seen(id: a.id, leadingBytes: Array(long[0..<ContentChange.leadingByteLimit]), mayHaveThumbnails: true),
                Seen(
                    id: shot.id, leadingBytes: Array(long[0..<ContentChange.leadingByteLimit]), mayHaveThumbnails: true),
            ])
        try v.close()
    }

    /// Storing the handler where it was reached through an `inout` generic accessor wrapped it in two
    /// reabstraction thunks at every notice, so the ten-thousandth release of a written file ran
    /// twenty thousand nested calls: creates slowed with the number of files written since mount
    /// and the daemon's stack would have overflowed in the end. Notices on a thread with a small stack
    /// must keep working however many came before.
    func testTheContentHandlerStaysOneCallDeepAfterManyNotices() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let count = Guarded(0)
        v.onContentChanged { _ in count.withLock { $0 += 1 } }
        v.onReport { _ in count.withLock { $0 += 1 } }
        let notices = 100_000
        let done = DispatchSemaphore(value: 0)
        // 256 KiB holds a few thousand nested thunks, far fewer than the notices sent.
        let thread = Thread {
            for i in 0..<notices {
                v.contentChanged(ContentChange(id: UInt64(i), leadingBytes: nil, mayHaveThumbnails: true))
                v.report("notice")
            }
            done.signal()
        }
        thread.stackSize = 256 << 10
        thread.start()
        done.wait()
        XCTAssertEqual(count.withLock { $0 }, 2 * notices)
        try v.close()
    }

    func testUnlinkRemovesTheThumbnailWithTheBlob() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.writeFile("/a.jpg", [1])
        let a = try v.resolve("/a.jpg")
        try v.setThumbnail(a.id, image: [5])
        let file = try v.layout.thumbnailFile(a.blobID)
        XCTAssertTrue(try file.exists())
        try v.unlink(in: Inode.rootID, name: "a.jpg")
        v.reaper.drain()
        XCTAssertFalse(try file.exists())
        try v.close()
    }
}
