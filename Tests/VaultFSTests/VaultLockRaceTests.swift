import Glibc
import XCTest

@testable import VaultFS
@testable import VaultSystem

/// mount.lock is removed by its holder as it lets go. A process that opened the old file just before
/// could then lock that removed file while another locks the new one: two writers. Only a lock on the
/// file still at the path counts.
final class VaultLockRaceTests: XCTestCase {
    func testALockOnARemovedLockFileIsNotTheLock() throws {
        let directory = "/tmp/vaultaire-lock-race-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileSystem.makeDirectories(directory)
        defer { _ = system("rm -rf '\(directory)'") }
        let file = try DirectoryDescriptor(path: directory).file("mount.lock")
        var first: VaultLock? = try VaultLock.acquire(file)
        // A second process opens the file while the first still holds it …
        let late = try file.open(flags: O_RDWR)
        // … the first lets go (removing the file), and a third process takes a new lock file.
        first = nil
        XCTAssertNil(first)
        let third = try VaultLock.acquire(file)
        // The late opener can flock what it opened, but that file is no longer the lock.
        XCTAssertEqual(flock(late.rawValue, LOCK_EX | LOCK_NB), 0)
        XCTAssertFalse(try VaultLock.isCurrent(late, at: file))
        XCTAssertTrue(try VaultLock.isCurrent(try file.open(flags: O_RDONLY), at: file))
        withExtendedLifetime(third) {}
    }

    func testAcquiringAgainAfterReleaseWorks() throws {
        let directory = "/tmp/vaultaire-lock-again-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileSystem.makeDirectories(directory)
        defer { _ = system("rm -rf '\(directory)'") }
        let file = try DirectoryDescriptor(path: directory).file("mount.lock")
        for _ in 0..<20 {
            let lock = try VaultLock.acquire(file)
            XCTAssertThrowsError(try VaultLock.acquire(file))
            withExtendedLifetime(lock) {}
        }
    }
}
