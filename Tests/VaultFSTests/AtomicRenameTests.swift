import Glibc
import XCTest

@testable import VaultFS
@testable import VaultFormat
@testable import VaultSystem

/// Rename over an existing name is one journal record, so no crash point lies between the target
/// going and the source arriving; the replaced file's blob is removed only after the journal is durable.
final class AtomicRenameTests: XCTestCase {
    func testRenameOverAnExistingFileIsOneRecord() throws {
        let t = try TestVault()
        let vault = try t.open()
        try vault.writeFile("/doc.txt", Array("old".utf8))
        try vault.writeFile("/.doc.txt.swp", Array("new".utf8))
        let before = vault.generation
        try vault.rename(from: Inode.rootID, name: ".doc.txt.swp", to: Inode.rootID, newName: "doc.txt")
        XCTAssertEqual(vault.generation, before + 1)
        XCTAssertEqual(try vault.readFile("/doc.txt"), Array("new".utf8))
        XCTAssertThrowsError(try vault.resolve("/.doc.txt.swp"))
        try vault.close()
        let reopened = try t.open()
        XCTAssertEqual(try reopened.readFile("/doc.txt"), Array("new".utf8))
        XCTAssertTrue(reopened.verify().isIntact)
        try reopened.close()
    }

    func testRenameOverADirectoryAcrossParentsKeepsLinkCounts() throws {
        let t = try TestVault()
        let vault = try t.open()
        let caller = Caller.current
        let a = try vault.makeNode(in: Inode.rootID, name: "a", kind: .directory, permissions: 0o755, caller: caller)
        let b = try vault.makeNode(in: Inode.rootID, name: "b", kind: .directory, permissions: 0o755, caller: caller)
        try vault.makeNode(in: a.id, name: "moving", kind: .directory, permissions: 0o755, caller: caller)
        try vault.makeNode(in: b.id, name: "victim", kind: .directory, permissions: 0o755, caller: caller)
        let before = vault.generation
        try vault.rename(from: a.id, name: "moving", to: b.id, newName: "victim")
        XCTAssertEqual(vault.generation, before + 1)
        XCTAssertEqual(try vault.attributes(a.id).linkCount, 2)
        XCTAssertEqual(try vault.attributes(b.id).linkCount, 3)
        try vault.makeNode(in: b.id, name: "other", kind: .directory, permissions: 0o755, caller: caller)
        try vault.rename(from: b.id, name: "other", to: b.id, newName: "victim")
        XCTAssertEqual(try vault.attributes(b.id).linkCount, 3)
        try vault.close()
        let reopened = try t.open()
        XCTAssertEqual(try reopened.attributes(b.id).linkCount, 3)
        try reopened.close()
    }

    func testTheReaperRemovesNothingUntilTheJournalIsDurable() throws {
        let directory = "/tmp/vaultaire-reaper-sync-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileSystem.makeDirectories(directory)
        defer { _ = system("rm -rf '\(directory)'") }
        let dir = try DirectoryDescriptor(path: directory)
        let kept = dir.file("kept")
        let removed = dir.file("removed")
        try kept.replace(with: [1])
        try removed.replace(with: [2])
        let failing = BlobReaper(gatherMilliseconds: 1, lingerMilliseconds: 50, beforeRemoving: { false })
        failing.remove([kept])
        failing.drain()
        XCTAssertTrue(FileSystem.exists(kept.path), "a batch whose journal could not be synced stays")
        let syncs = Counter()
        let working = BlobReaper(
            gatherMilliseconds: 1, lingerMilliseconds: 50,
            beforeRemoving: {
                syncs.add()
                return true
            })
        working.remove([removed])
        working.drain()
        XCTAssertFalse(FileSystem.exists(removed.path))
        XCTAssertEqual(syncs.value, 1)
    }
}

private final class Counter: @unchecked Sendable {
    private let lock = Mutex()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
