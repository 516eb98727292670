import Foundation
import XCTest

/// fallocate(2) and lseek(2) SEEK_DATA / SEEK_HOLE through a real mount. Every punched hole is
/// checked against the same calls on a file of the host's own filesystem, which must read the same.
final class FallocateAndSeekTests: MountTestCase {
    private let chunk = 4096

    /// lseek on a file of the mount, opened read-only here. A writer's last close reaches the daemon
    /// a moment after close(2) returns, and until then holes are not reported (EOPNOTSUPP): wait for it.
    private func seek(_ name: String, _ offset: Int, data: Bool) throws -> Result<Int, POSIXError> {
        let fd = open(mv.mountpoint + "/" + name, O_RDONLY)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno)!) }
        defer { close(fd) }
        for _ in 0..<200 {
            let r = lseek(fd, off_t(offset), data ? 3 : 4)  // SEEK_DATA, SEEK_HOLE
            if r >= 0 { return .success(Int(r)) }
            let e = errno
            guard e == EOPNOTSUPP else { return .failure(POSIXError(POSIXErrorCode(rawValue: e)!)) }
            usleep(10_000)
        }
        return .failure(POSIXError(.EOPNOTSUPP))
    }

    private func allocatedBytes(ofBlobLongerThan length: Int, below: Int = .max) throws -> Int {
        let blob = try XCTUnwrap(mv.blobSizes().first { $0.size > length && $0.size < below }, "the blob")
        var st = stat()
        XCTAssertEqual(stat(mv.vault + "/blobs/" + blob.name, &st), 0)
        return Int(st.st_blocks) * 512
    }

    func testPunchedHolesReadAsZerosLikeTheHostsAndFreeTheirSpace() throws {
        try mv.mount()
        let local = mv.root + "/local"
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        // The same punches, in the vault and on the host: aligned, inside one chunk, across chunk edges,
        // to the end of a file whose last chunk is partial, and past its end.
        let punches = [
            "-o 4096 -l 524288", "-o 600000 -l 100", "-o 700001 -l 20000", "-o 1040000 -l 100000",
            "-o 2000000 -l 4096",
        ]
        var script = "head -c 1044000 /dev/urandom > '\(local)/b'\ncp '\(local)/b' b\n"
        for p in punches { script += "fallocate -p \(p) b\nfallocate -p \(p) '\(local)/b'\n" }
        script += "cmp b '\(local)/b'\n"
        try mv.shell(script)
        XCTAssertEqual(try seek("b", 0, data: true).get(), 0)
        XCTAssertEqual(try seek("b", 0, data: false).get(), 4096, "the first hole starts where the punch did")
        XCTAssertEqual(try seek("b", 5000, data: true).get(), 4096 + 524288, "data resumes after it")
        let lastWhole = (1_040_000 / chunk + 1) * chunk
        XCTAssertEqual(try seek("b", 1_040_000, data: true).get(), 1_040_000, "zeroed, not a hole: a partial chunk")
        XCTAssertEqual(
            try seek("b", 1_040_000, data: false).get(), lastWhole, "the punch to the end makes the last chunk a hole")
        XCTAssertThrowsError(try seek("b", lastWhole, data: true).get(), "no data after that") {
            XCTAssertEqual(($0 as? POSIXError)?.code, .ENXIO)
        }
        XCTAssertThrowsError(try seek("b", 1_044_000, data: false).get(), "at the end") {
            XCTAssertEqual(($0 as? POSIXError)?.code, .ENXIO)
        }
        try mv.unmount()
        XCTAssertLessThan(
            try allocatedBytes(ofBlobLongerThan: 1_000_000), 1_044_000 - 400_000, "the punched chunks' space was freed")
        // The holes are in the index: after a remount the file reads the same and seeks the same.
        try mv.mount()
        try mv.shell("cmp b '\(local)/b'")
        XCTAssertEqual(try seek("b", 5000, data: true).get(), 4096 + 524288)
        try mv.unmount()
        try mv.verify()
    }

    func testAllocationReservesSpaceAndGrowsTheFileUnlessKeepSize() throws {
        try mv.mount()
        try mv.shell("fallocate -l 64M grown\ntouch kept\nfallocate -n -l 8M kept\n")
        try mv.shell("[ \"$(stat -c %s grown)\" = 67108864 ]")
        try mv.shell("[ \"$(stat -c %s kept)\" = 0 ]")
        try mv.shell("[ \"$(head -c 67108864 grown | tr -d '\\0' | wc -c)\" = 0 ]")
        XCTAssertThrowsError(try seek("grown", 0, data: true).get(), "an allocated range is a hole") {
            XCTAssertEqual(($0 as? POSIXError)?.code, .ENXIO)
        }
        XCTAssertEqual(try seek("grown", 0, data: false).get(), 0)
        let zeroRange = try mv.execute("/bin/bash", ["-c", "cd '\(mv.mountpoint)' && fallocate -z -l 4096 grown"])
        XCTAssertNotEqual(zeroRange.status, 0, "FALLOC_FL_ZERO_RANGE is not supported")
        XCTAssertTrue(zeroRange.stderr.contains("not supported"), zeroRange.stderr)
        try mv.unmount()
        XCTAssertGreaterThanOrEqual(
            try allocatedBytes(ofBlobLongerThan: 64 << 20), 64 << 20, "mode 0 reserved the host space")
        XCTAssertGreaterThanOrEqual(
            try allocatedBytes(ofBlobLongerThan: 0, below: 4096), 8 << 20, "KEEP_SIZE reserved it past the end")
        try mv.mount()
        try mv.shell(
            """
            printf data | dd of=grown bs=1 seek=33554432 conv=notrunc status=none
            [ "$(dd if=grown bs=1 skip=33554432 count=4 status=none)" = data ]
            [ "$(stat -c %s grown)" = 67108864 ]
            """)
        try mv.unmount()
        try mv.mount()
        XCTAssertEqual(try seek("grown", 0, data: true).get(), 33_554_432, "the written chunk is data")
        XCTAssertEqual(try seek("grown", 33_554_432, data: false).get(), 33_554_432 + chunk)
        try mv.unmount()
        try mv.verify()
    }

    func testSeekOnASparseFileMadeByTruncate() throws {
        try mv.mount()
        try mv.shell(
            """
            truncate -s 3G sparse
            printf data | dd of=sparse bs=1 seek=1073741824 conv=notrunc status=none
            """)
        XCTAssertEqual(try seek("sparse", 0, data: false).get(), 0)
        XCTAssertEqual(try seek("sparse", 0, data: true).get(), 1 << 30)
        XCTAssertEqual(try seek("sparse", 1 << 30, data: false).get(), (1 << 30) + chunk)
        XCTAssertThrowsError(try seek("sparse", (1 << 30) + chunk, data: true).get()) {
            XCTAssertEqual(($0 as? POSIXError)?.code, .ENXIO)
        }
        // cp --sparse=always follows the holes: the copy on the host is as sparse as the file.
        try mv.shell("cp --sparse=always sparse '\(mv.root)/copy'")
        var st = stat()
        XCTAssertEqual(stat(mv.root + "/copy", &st), 0)
        XCTAssertEqual(Int(st.st_size), 3 << 30)
        XCTAssertLessThan(Int(st.st_blocks) * 512, 1 << 20)
        try mv.unmount()
    }
}
