import Foundation
import TestSupport
import XCTest

final class ConcurrencyTests: MountTestCase {
    /// Parallel writers of different files, and readers of a file while one thread rewrites it:
    /// every read returns one of the versions written (whole 4 KiB records), never a torn or foreign one.
    func testParallelWritersAndReadersSeeNoCorruption() throws {
        try mv.mount()
        let root = mv.mountpoint
        let record = 4096
        let records = 64
        let group = DispatchGroup()
        let problems = Shared<[String]>([])
        let problem: @Sendable (String) -> Void = { s in problems.withLock { $0.append(s) } }

        // Each record is filled with one byte: (writer id × 16 + generation) — a reader can tell whole from torn.
        for w in 0..<4 {
            group.enter()
            Thread {
                defer { group.leave() }
                let path = root + "/w\(w)"
                let fd = open(path, O_RDWR | O_CREAT, 0o644)
                guard fd >= 0 else { return problem("open \(path): \(errno)") }
                defer { close(fd) }
                for generation in 0..<8 {
                    for r in (0..<records).shuffled() {
                        let byte = UInt8(w * 16 + generation)
                        let buf = [UInt8](repeating: byte, count: record)
                        if buf.withUnsafeBytes({ pwrite(fd, $0.baseAddress, record, off_t(r * record)) }) != record {
                            problem("write")
                        }
                    }
                    if generation % 3 == 0 { fsync(fd) }
                }
            }.start()
        }
        // Readers of w0 while it is being written.
        for _ in 0..<3 {
            group.enter()
            Thread {
                defer { group.leave() }
                var buf = [UInt8](repeating: 0, count: record)
                for _ in 0..<200 {
                    let fd = open(root + "/w0", O_RDONLY)
                    if fd < 0 {
                        usleep(1000)
                        continue
                    }
                    let r = Int.random(in: 0..<records)
                    let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, record, off_t(r * record)) }
                    close(fd)
                    guard n == record else { continue }  // not yet written that far
                    let first = buf[0]
                    if !buf.allSatisfy({ $0 == first }) { problem("torn record \(r)") }
                    if first != 0 && first >> 4 != 0 { problem("foreign data \(first) in w0") }
                }
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(problems.current, [])
        for w in 0..<4 {
            let data = try XCTUnwrap(FileManager.default.contents(atPath: root + "/w\(w)"))
            XCTAssertEqual(data.count, record * records)
            XCTAssertTrue(data.allSatisfy { $0 == UInt8(w * 16 + 7) }, "w\(w) holds its last generation")
        }
        try mv.unmount()
        try mv.verify()
    }

    /// Reads that reach the daemon at the same time, on different worker threads, each get their own
    /// file's bytes (the daemon reuses one reply buffer per thread). The page cache is dropped before
    /// every read so that each one is a request.
    func testParallelColdReadsOfDifferentFilesGetTheirOwnBytes() throws {
        try mv.mount()
        let size = 1 << 20
        let contents = (0..<4).map { _ in (0..<size).map { _ in UInt8.random(in: 0...255) } }
        for (i, bytes) in contents.enumerated() {
            XCTAssertTrue(FileManager.default.createFile(atPath: mv.mountpoint + "/r\(i)", contents: Data(bytes)))
        }
        let group = DispatchGroup()
        let problems = Shared<[String]>([])
        for i in 0..<4 {
            group.enter()
            Thread { [mountpoint = mv.mountpoint] in
                defer { group.leave() }
                let fd = open(mountpoint + "/r\(i)", O_RDONLY)
                guard fd >= 0 else {
                    problems.withLock { $0.append("open r\(i): \(errno)") }
                    return
                }
                defer { close(fd) }
                var buffer = [UInt8](repeating: 0, count: size)
                for _ in 0..<60 {
                    _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
                    let offset = Int.random(in: 0..<16) * 4096
                    let length = Int.random(in: 1...(size - offset))
                    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, length, off_t(offset)) }
                    if n != length || !buffer[0..<length].elementsEqual(contents[i][offset..<offset + length]) {
                        problems.withLock { $0.append("r\(i) at \(offset)+\(length): got \(n) bytes, not the file's") }
                        return
                    }
                }
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(problems.current, [])
        try mv.unmount()
    }

    /// A damaged file reads as EIO; its neighbours stay readable.
    func testDamagedFileIsEIOAndOnlyThatFile() throws {
        try mv.mount()
        try mv.shell("echo 'healthy neighbour' > good.txt; head -c 100000 /dev/urandom > bad.bin")
        try mv.unmount()
        // Find bad.bin's blob: the larger one.
        let bad = try XCTUnwrap(mv.blobSizes().max { $0.size < $1.size }).name
        try mv.flipByte(ofBlob: bad, at: 40_000)
        try mv.mount()
        let r = try mv.execute("/bin/bash", ["-c", "cd '\(mv.mountpoint)'; cat good.txt; cat bad.bin > /dev/null"])
        XCTAssertEqual(r.stdout, "healthy neighbour\n")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("Input/output error"), r.stderr)
        try mv.unmount()
        let v = try mv.vaultaire(["verify", mv.vault, "--passphrase-file", mv.passphraseFile], expect: 13)
        XCTAssertTrue(v.stdout.contains("DAMAGED /bad.bin"))
    }
}
