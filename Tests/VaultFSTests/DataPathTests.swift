import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultSystem

final class DataPathTests: XCTestCase {
    func testRoundTripsAtChunkBoundaries() throws {
        let tv = try TestVault()
        let chunk = 4096
        let sizes = [0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk, 3 * 1024 * 1024 + 17]
        var v = try tv.open()
        var contents: [String: [UInt8]] = [:]
        for size in sizes {
            let data = randomBytes(size)
            contents["/f\(size)"] = data
            try v.writeFile("/f\(size)", data)
            XCTAssertEqual(try v.readFile("/f\(size)"), data, "size \(size) before close")
        }
        try v.close()
        v = try tv.open()
        for (path, data) in contents { XCTAssertEqual(try v.readFile(path), data, "\(path) after reopen") }
        XCTAssertTrue(v.verify().isIntact)
        try v.close()
    }

    func testRandomWritesTruncatesAndSparseGapsMatchAModel() throws {
        let tv = try TestVault()
        var v = try tv.open()
        let (parent, name) = try v.resolveParent("/random.bin")
        var h = try v.create(in: parent, name: name, permissions: 0o600, caller: .current)
        var model: [UInt8] = []
        var rng = SystemRandomNumberGenerator()
        for step in 0..<400 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0:
                let size = Int.random(in: 0..<60_000, using: &rng)
                try v.setSize(h.id, to: size)
                if size < model.count {
                    model.removeLast(model.count - size)
                } else {
                    model += [UInt8](repeating: 0, count: size - model.count)
                }
            case 1:
                try v.fsync(h)
                v.release(h)
                try v.close()
                v = try tv.open()
                h = try v.open(try v.resolve("/random.bin").id, write: true)
            default:
                let offset = Int.random(in: 0..<70_000, using: &rng)
                // Every third write is long enough to hold whole chunks, which are sealed ahead of the lock.
                let data = randomBytes(Int.random(in: 1..<(step % 3 == 0 ? 40_000 : 9000), using: &rng))
                _ = try data.withUnsafeBytes { try v.write(h, at: offset, from: $0) }
                if model.count < offset + data.count {
                    model += [UInt8](repeating: 0, count: offset + data.count - model.count)
                }
                model.replaceSubrange(offset..<offset + data.count, with: data)
            }
            XCTAssertEqual(Int(try v.attributes(h.id).size), model.count, "size after step \(step)")
            if step % 20 == 0 {
                var out = [UInt8](repeating: 0, count: model.count + 100)
                let n = try out.withUnsafeMutableBytes { try v.read(h, at: 0, into: $0) }
                XCTAssertEqual(Array(out[0..<n]), model, "content after step \(step)")
            }
        }
        v.release(h)
        try v.close()
        let again = try tv.open()
        XCTAssertEqual(try again.readFile("/random.bin"), model)
        let report = again.verify()
        XCTAssertTrue(report.isIntact, "\(report.damaged)")
        try again.close()
    }

    /// Chunks a write past the end skips read as zeros and are never written: they become holes in
    /// the record at the flush (what fills one first is written as usual), and stay sparse on the host.
    func testChunksAWritePastTheEndSkipsBecomeHolesAndStayUnwritten() throws {
        let tv = try TestVault()
        var v = try tv.open()
        let chunk = 4096
        let slot = chunk + FileBlob.chunkOverhead
        let h = try v.create(in: Inode.rootID, name: "g", permissions: 0o644, caller: .current)
        let blob = try FileDescriptor(path: v.layout.blobPath(try v.resolve("/g").blobID), flags: O_RDONLY)
        func slotIsBlank(_ index: Int) throws -> Bool {
            var bytes = [UInt8](repeating: 0xff, count: slot)
            let n = try bytes.withUnsafeMutableBytes {
                try blob.read(into: $0, at: FileBlob.v2HeaderSize + index * slot)
            }
            return bytes[0..<n].allSatisfy { $0 == 0 }
        }
        let tail = randomBytes(2 * chunk)
        let middle = randomBytes(chunk)
        _ = try tail.withUnsafeBytes { try v.write(h, at: 8 * chunk, from: $0) }
        _ = try middle.withUnsafeBytes { try v.write(h, at: 3 * chunk, from: $0) }
        var model = [UInt8](repeating: 0, count: 10 * chunk)
        model.replaceSubrange(8 * chunk..<10 * chunk, with: tail)
        model.replaceSubrange(3 * chunk..<4 * chunk, with: middle)

        var out = [UInt8](repeating: 1, count: 10 * chunk)
        XCTAssertEqual(try out.withUnsafeMutableBytes { try v.read(h, at: 0, into: $0) }, model.count)
        XCTAssertEqual(out, model, "the gap reads as zeros before anything fills it")
        try v.flush(h)
        for index in [0, 1, 2, 4, 5, 6, 7] { XCTAssertTrue(try slotIsBlank(index), "chunk \(index) is a hole") }
        for index in [3, 8, 9] { XCTAssertFalse(try slotIsBlank(index), "chunk \(index) written") }
        XCTAssertEqual(try v.resolve("/g").holes, [0..<3, 4..<8], "the record names the holes")
        v.release(h)
        try v.close()
        v = try tv.open()
        XCTAssertEqual(try v.readFile("/g"), model)
        XCTAssertTrue(v.verify().isIntact)
        try v.close()
    }

    /// New files are stamped with the kernel's own coarse clock, so that with the write-back cache a
    /// write in the same clock tick leaves the times alone and the kernel has none to push back; their
    /// directory keeps the fine clock, so its times never step back behind an earlier change.
    func testNewFilesAreStampedOnTheKernelsClockTick() throws {
        let tv = try TestVault()
        let v = try tv.open()
        for k in 0..<20 {
            v.release(try v.create(in: Inode.rootID, name: "scratch", permissions: 0o644, caller: .current))
            try v.unlink(in: Inode.rootID, name: "scratch")
            let directoryBefore = try v.attributes(Inode.rootID)
            let before = coarseNowNanoseconds()
            let h = try v.create(in: Inode.rootID, name: "f\(k)", permissions: 0o644, caller: .current)
            let after = coarseNowNanoseconds()
            let node = try v.attributes(h.id)
            v.release(h)
            for (what, time) in [("mtime", node.modificationTime), ("ctime", node.changeTime)] {
                XCTAssertTrue(
                    before <= time && time <= after, "file \(k) \(what) \(time) outside the tick [\(before), \(after)]")
            }
            let directory = try v.attributes(Inode.rootID)
            XCTAssertGreaterThanOrEqual(
                directory.modificationTime, directoryBefore.modificationTime,
                "directory mtime stepped back at file \(k)")
            XCTAssertGreaterThanOrEqual(
                directory.changeTime, directoryBefore.changeTime, "directory ctime stepped back at file \(k)")
        }
        try v.close()
    }

    /// A new vault comes with all 256 fan-out directories for blobs, so its first files do not each
    /// pay a mkdir; they are private to the owner like the rest of the vault.
    func testANewVaultHasEveryBlobDirectory() throws {
        let tv = try TestVault()
        let layout = VaultLayout(root: tv.path)
        let subdirectories = try FileSystem.listDirectory(layout.blobsDirectory)
        XCTAssertEqual(Set(subdirectories), Set((0...255).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }))
        for name in subdirectories {
            XCTAssertEqual((FileSystem.fileMode(layout.blobsDirectory + "/" + name)?.mode ?? 0) & 0o7777, 0o700, name)
        }
        let v = try tv.open()
        try v.writeFile("/a", [1, 2, 3])
        XCTAssertEqual(try FileSystem.listDirectory(layout.blobsDirectory).count, 256)
        XCTAssertEqual(try layout.blobIDsOnDisk(), [try v.resolve("/a").blobID])
        try v.close()
    }

    func testUnlinkedOpenFileStaysUsableUntilRelease() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.writeFile("/a", Array("hello".utf8))
        let node = try v.resolve("/a")
        let h = try v.open(node.id, write: true)
        try v.unlink(in: Inode.rootID, name: "a")
        XCTAssertThrowsError(try v.resolve("/a"))
        _ = try Array(" world".utf8).withUnsafeBytes { try v.write(h, at: 5, from: $0) }
        var out = [UInt8](repeating: 0, count: 20)
        let n = try out.withUnsafeMutableBytes { try v.read(h, at: 0, into: $0) }
        XCTAssertEqual(Array(out[0..<n]), Array("hello world".utf8))
        let blob = v.layout.blobPath(node.blobID)
        XCTAssertTrue(FileSystem.exists(blob))
        v.release(h)
        v.reaper.drain()  // the blob goes to the reaper, which removes it once the journal is durable
        XCTAssertFalse(FileSystem.exists(blob), "blob goes with the last handle")
        try v.close()
    }

    /// Deleted files' blobs are removed in the background; by the time the vault is locked (or
    /// verified) every one is gone and only the kept files' blobs remain.
    func testDeletedBlobsAreGoneByLockAndVerify() throws {
        let tv = try TestVault()
        let v = try tv.open()
        for i in 0..<60 { try v.writeFile("/f\(i)", randomBytes(100 + i)) }
        for i in 0..<50 { try v.unlink(in: Inode.rootID, name: "f\(i)") }
        let report = v.verify()
        XCTAssertTrue(report.isIntact)
        XCTAssertFalse(report.notices.contains { $0.contains("belong to no file") }, "\(report.notices)")
        for i in 50..<55 { try v.unlink(in: Inode.rootID, name: "f\(i)") }
        try v.close()
        XCTAssertEqual(try v.layout.blobIDsOnDisk().count, 5)
    }

    func testNamespaceOperationsAndLinkCounts() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let caller = Caller.current
        let d = try v.makeNode(in: Inode.rootID, name: "d", kind: .directory, permissions: 0o755, caller: caller)
        XCTAssertEqual(try v.attributes(Inode.rootID).linkCount, 3)
        try v.writeFile("/d/x", [1, 2, 3])
        XCTAssertThrowsError(try v.removeDirectory(in: Inode.rootID, name: "d")) {
            XCTAssertEqual(($0 as? FSError)?.errno, ENOTEMPTY)
        }
        XCTAssertThrowsError(try v.makeNode(in: d.id, name: "x", kind: .file, permissions: 0o644, caller: caller)) {
            XCTAssertEqual(($0 as? FSError)?.errno, EEXIST)
        }
        XCTAssertThrowsError(
            try v.makeNode(
                in: d.id, name: String(repeating: "n", count: 256), kind: .file, permissions: 0o644, caller: caller)
        ) {
            XCTAssertEqual(($0 as? FSError)?.errno, ENAMETOOLONG)
        }
        let x = try v.resolve("/d/x")
        _ = try v.link(x.id, into: Inode.rootID, name: "hard")
        XCTAssertEqual(try v.attributes(x.id).linkCount, 2)
        try v.rename(from: d.id, name: "x", to: Inode.rootID, newName: "hard")  // same inode: no-op
        try v.rename(from: d.id, name: "x", to: d.id, newName: "y")
        XCTAssertEqual(try v.readFile("/d/y"), [1, 2, 3])
        try v.writeFile("/other", [9])
        XCTAssertThrowsError(try v.rename(from: Inode.rootID, name: "other", to: d.id, newName: "y", mode: .noReplace))
        try v.rename(from: Inode.rootID, name: "other", to: d.id, newName: "y", mode: .exchange)
        XCTAssertEqual(try v.readFile("/d/y"), [9])
        XCTAssertEqual(try v.readFile("/other"), [1, 2, 3])
        XCTAssertThrowsError(try v.rename(from: Inode.rootID, name: "d", to: d.id, newName: "inside")) {
            XCTAssertEqual(($0 as? FSError)?.errno, EINVAL)
        }
        try v.makeNode(
            in: Inode.rootID, name: "link", kind: .symlink, permissions: 0o777, caller: caller,
            symlinkTarget: Array("d/y".utf8))
        XCTAssertEqual(try v.readLink(try v.resolve("/link").id), Array("d/y".utf8))
        try v.setExtendedAttribute(x.id, name: "user.tag", value: [1, 2], create: true, replace: false)
        XCTAssertThrowsError(
            try v.setExtendedAttribute(x.id, name: "trusted.x", value: [1], create: false, replace: false))
        try v.close()
        let again = try tv.open()
        XCTAssertEqual(try again.extendedAttribute(x.id, name: "user.tag"), [1, 2])
        XCTAssertEqual(try again.attributes(x.id).linkCount, 2)
        XCTAssertEqual(try again.readFile("/hard"), [1, 2, 3])
        try again.close()
    }

    func testThumbnailRoundTripAndBinding() throws {
        let tv = try TestVault()
        let v = try tv.open()
        try v.writeFile("/a.jpg", [1])
        try v.writeFile("/b.jpg", [2])
        let a = try v.resolve("/a.jpg")
        let b = try v.resolve("/b.jpg")
        try v.setThumbnail(a.id, image: [7, 7, 7])
        XCTAssertEqual(try v.thumbnail(a.id), [7, 7, 7])
        XCTAssertNil(try v.thumbnail(b.id))
        // A thumbnail moved to another file does not authenticate there.
        try v.layout.prepareParent(of: v.layout.thumbnailFile(b.blobID))
        try FileSystem.replaceFile(
            v.layout.thumbnailPath(b.blobID), with: try FileSystem.readFile(v.layout.thumbnailPath(a.blobID)))
        XCTAssertThrowsError(try v.thumbnail(b.id))
        try v.close()
    }

    /// Aligned whole-chunk reads run under a shared lock, beside a writer that keeps rewriting and
    /// growing the file: every chunk a reader gets is one the writer wrote whole (all one byte value,
    /// the current or an earlier version), never an error, never a mix.
    func testSharedLockReadsBesideAWriterSeeWholeChunks() throws {
        let tv = try TestVault()
        let v = try tv.open()
        let chunk = 4096
        let chunks = 256
        let (parent, name) = try v.resolveParent("/shared.bin")
        let h = try v.create(in: parent, name: name, permissions: 0o600, caller: .current)
        let first = [UInt8](repeating: 1, count: chunks * chunk)
        _ = try first.withUnsafeBytes { try v.write(h, at: 0, from: $0) }
        try v.fsync(h)  // on disk, out of the cache: the shared path applies
        let failures = Locked<[String]>([])
        let stop = Locked(false)
        let readers = (0..<4).map { r in
            Thread {
                var buffer = [UInt8](repeating: 0, count: 64 * chunk)
                var rounds = 0
                while !stop.withLock({ $0 }) || rounds < 50 {
                    rounds += 1
                    let offset = Int.random(in: 0..<(chunks - 64)) * chunk
                    do {
                        let n = try buffer.withUnsafeMutableBytes { try v.read(h, at: offset, into: $0) }
                        for c in 0..<(n / chunk) {
                            let piece = buffer[c * chunk..<(c + 1) * chunk]
                            let value = piece.first!
                            if value == 0 || piece.contains(where: { $0 != value }) {
                                failures.withLock {
                                    $0.append("reader \(r): chunk \(offset / chunk + c) mixed or empty")
                                }
                                return
                            }
                        }
                    } catch {
                        failures.withLock { $0.append("reader \(r): \(error)") }
                        return
                    }
                }
            }
        }
        for reader in readers { reader.start() }
        for version in 2...60 {
            let k = Int.random(in: 0..<chunks - 8)
            let data = [UInt8](repeating: UInt8(version), count: 8 * chunk)
            _ = try data.withUnsafeBytes { try v.write(h, at: k * chunk, from: $0) }
            if version % 3 == 0 { try v.fsync(h) }
        }
        stop.withLock { $0 = true }
        while readers.contains(where: { !$0.isFinished }) { usleep(1000) }
        XCTAssertEqual(failures.withLock { $0 }, [])
        v.release(h)
        try v.close()
    }

    /// Large writes seal their whole chunks before taking the file's lock, so two threads writing
    /// one file at once encrypt in parallel. Whatever order they land in, the content matches, the
    /// last chunk carries the final flag (a fresh open checks it strictly) and `verify` passes.
    func testConcurrentLargeWritesSealedAheadMatchAModel() throws {
        let tv = try TestVault()
        var v = try tv.open()
        let chunk = 4096
        let slot = 64 * chunk
        let slots = 12
        let (parent, name) = try v.resolveParent("/parallel.bin")
        let h = try v.create(in: parent, name: name, permissions: 0o600, caller: .current)
        // Each slot gets one write: whole, or starting and ending inside a chunk (partial chunks
        // go through the cache, the whole ones in between are sealed ahead).
        var pieces: [(offset: Int, data: [UInt8])] = (0..<slots).map { k in
            let start = k * slot + (k % 3 == 1 ? 100 : 0)
            let end = (k + 1) * slot - (k % 4 == 2 ? 333 : 0)
            return (start, randomBytes(end - start))
        }
        pieces.shuffle()
        var model = [UInt8](repeating: 0, count: slots * slot)
        for p in pieces { model.replaceSubrange(p.offset..<p.offset + p.data.count, with: p.data) }
        let expectedSize = pieces.map { $0.offset + $0.data.count }.max()!
        let failures = Locked<[String]>([])
        let (vault, order) = (v, pieces)
        let writers = (0..<2).map { w in
            Thread {
                for p in order.enumerated() where p.offset % 2 == w {
                    do {
                        _ = try p.element.data.withUnsafeBytes { try vault.write(h, at: p.element.offset, from: $0) }
                    } catch {
                        failures.withLock { $0.append("writer \(w): \(error)") }
                    }
                }
            }
        }
        for writer in writers { writer.start() }
        while writers.contains(where: { !$0.isFinished }) { usleep(1000) }
        XCTAssertEqual(failures.withLock { $0 }, [])
        XCTAssertEqual(Int(try v.attributes(h.id).size), expectedSize)
        try v.fsync(h)
        v.release(h)
        try v.close()
        v = try tv.open()
        XCTAssertEqual(try v.readFile("/parallel.bin"), Array(model[0..<expectedSize]))
        XCTAssertTrue(v.verify().isIntact)
        try v.close()
    }
}
