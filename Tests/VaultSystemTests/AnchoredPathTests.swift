import Glibc
import XCTest

@testable import VaultSystem

/// Files beneath a directory descriptor are reached through no symbolic link, must be regular files,
/// and temporaries are created exclusively (issue 22, finding 1).
final class AnchoredPathTests: XCTestCase {
    var root = ""
    var dir: DirectoryDescriptor!
    let victimText: [UInt8] = Array("IMPORTANT USER DATA\n".utf8)

    override func setUpWithError() throws {
        root = "/tmp/vaultaire-anchored-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileSystem.makeDirectories(root + "/vault/sub")
        try FileSystem.makeDirectories(root + "/elsewhere")
        try FileSystem.replaceFile(root + "/victim", with: victimText)
        dir = try DirectoryDescriptor(path: root + "/vault")
    }

    override func tearDown() { _ = system("rm -rf '\(root)'") }

    func assertUnsafe(
        _ body: @autoclosure () throws -> Any, naming path: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try body(), file: file, line: line) {
            guard let e = $0 as? UnsafeFileError else {
                return XCTFail("expected UnsafeFileError, got \($0)", file: file, line: line)
            }
            XCTAssertEqual(e.path, path, file: file, line: line)
        }
    }

    func victimIsIntact(file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(
            try FileSystem.readFile(root + "/victim"), victimText, "the victim file changed", file: file, line: line)
    }

    func testASymbolicLinkAsTheFileIsRefusedForEveryUse() throws {
        symlink(root + "/victim", root + "/vault/lock")
        let lock = dir.file("lock")
        assertUnsafe(try lock.open(flags: O_RDWR | O_CREAT), naming: root + "/vault/lock")
        assertUnsafe(try lock.open(flags: O_RDONLY), naming: root + "/vault/lock")
        assertUnsafe(try lock.read(limit: 100), naming: root + "/vault/lock")
        try victimIsIntact()
        // Removing it removes the link, never its target.
        try lock.remove()
        XCTAssertFalse(try lock.exists())
        try victimIsIntact()
    }

    func testASymbolicLinkOnTheWayIsRefused() throws {
        symlink(root + "/elsewhere", root + "/vault/index")
        let journal = dir.file("index/journal")
        assertUnsafe(try journal.open(flags: O_RDWR | O_CREAT | O_EXCL), naming: root + "/vault/index")
        assertUnsafe(try journal.replace(with: [1, 2, 3]), naming: root + "/vault/index")
        assertUnsafe(try dir.file("index/ab").makeDirectory(), naming: root + "/vault/index")
        XCTAssertEqual(try FileSystem.listDirectory(root + "/elsewhere"), [], "something was written through the link")
    }

    func testATemporaryThatIsALinkIsRefusedAndTheVictimKept() throws {
        try dir.file("header").replace(with: [1])
        symlink(root + "/victim", root + "/vault/header.tmp")
        assertUnsafe(try dir.file("header").replace(with: [2]), naming: root + "/vault/header.tmp")
        try victimIsIntact()
        XCTAssertEqual(try dir.file("header").read(limit: 10), [1])
        XCTAssertEqual(FileSystem.fileMode(root + "/vault/header").map { $0.mode & S_IFMT }, S_IFREG)
    }

    func testAStaleRegularTemporaryIsReplaced() throws {
        try FileSystem.replaceFile(root + "/vault/header.tmp", with: [9, 9])
        try dir.file("header").replace(with: [3])
        XCTAssertEqual(try dir.file("header").read(limit: 10), [3])
        XCTAssertFalse(FileSystem.exists(root + "/vault/header.tmp"))
    }

    func testAFIFOIsRefusedWithoutBlocking() throws {
        XCTAssertEqual(mkfifo(root + "/vault/fifo", 0o600), 0)
        assertUnsafe(try dir.file("fifo").open(flags: O_RDONLY), naming: root + "/vault/fifo")
        assertUnsafe(try dir.file("fifo").open(flags: O_WRONLY), naming: root + "/vault/fifo")
        assertUnsafe(try dir.file("fifo").open(flags: O_RDWR | O_CREAT), naming: root + "/vault/fifo")
        assertUnsafe(try dir.file("sub").open(flags: O_RDONLY), naming: root + "/vault/sub")
    }

    func testAHardLinkedTemporaryIsNotWrittenThrough() throws {
        // A hard link cannot be told from a stale temporary: it is removed, never opened.
        XCTAssertEqual(link(root + "/victim", root + "/vault/header.tmp"), 0)
        try dir.file("header").replace(with: [4])
        try victimIsIntact()
    }
}
