import Foundation
import TestSupport
import XCTest

/// A mount scans for a sync client's conflict copies only in the fan-out directories changed since
/// the last lock recorded them clean; a copy that a client puts in place while the vault is mounted,
/// more files being made beside it, still stops the next writable mount (exit 25).
final class ConflictScanTests: MountTestCase {
    func testACopyArrivingDuringAMountRefusesTheNextMount() throws {
        // Past the settle time of the vault's new directories, so that the first lock records them.
        usleep(2_300_000)
        try mv.mount()
        try mv.shell("for i in $(seq 50); do echo \"file $i\" > f$i; done")
        try mv.unmount()
        try mv.mount()
        let copy =
            mv.vault + "/blobs/9a/" + String(repeating: "b", count: 30) + ".sync-conflict-20261207-101010-ABCDEFG"
        try mv.shell("for i in $(seq 50); do echo \"more $i\" > g$i; done")
        XCTAssertTrue(FileManager.default.createFile(atPath: mv.root + "/incoming", contents: Data("B's blob".utf8)))
        XCTAssertEqual(rename(mv.root + "/incoming", copy), 0, "the client's rename into blobs/9a")
        try mv.shell("for i in $(seq 50); do echo \"after $i\" > h$i; done")
        // Past the settle time: only the watch keeps blobs/9a from being recorded clean at this lock.
        usleep(2_300_000)
        try mv.unmount()
        let refused = try mv.vaultaire(
            ["mount", mv.vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile], expect: 25)
        XCTAssertTrue(refused.stderr.contains(copy), "the refusal names the copy: \(refused.stderr)")
        XCTAssertFalse(mv.isMounted, "nothing mounted after the refusal")
        try mv.mount(["--read-only"])
        let listing = try mv.shell("cat f7 g7 h7")
        XCTAssertEqual(listing.stdout, "file 7\nmore 7\nafter 7\n", "files of both mounts read back")
        try mv.unmount()
    }
}
