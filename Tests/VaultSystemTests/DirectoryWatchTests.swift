import Glibc
import XCTest

@testable import VaultSystem

/// inotify through `DirectoryWatch`: a notable name disturbs only its own directory, a directory moved
/// away or replaced is no longer quiet, and names not picked out leave a directory quiet.
final class DirectoryWatchTests: XCTestCase {
    var root = ""

    override func setUpWithError() throws {
        root = "/tmp/vaultaire-watch-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for name in ["", "/a", "/b", "/c"] { try FileSystem.makeDirectories(root + name) }
    }

    override func tearDown() { _ = system("rm -rf '\(root)'") }

    func watch() throws -> DirectoryWatch {
        let top = try DirectoryDescriptor(path: root)
        return try XCTUnwrap(
            DirectoryWatch(directories: ["a", "b", "c", "missing"].map { top.file($0) }) { $0.hasSuffix(".conflict") })
    }

    func identity(_ name: String) -> DirectoryWatch.Identity {
        var st = stat()
        XCTAssertEqual(stat(root + "/" + name, &st), 0, "stat \(name)")
        return DirectoryWatch.Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    func testANotableNameDisturbsOnlyItsDirectory() throws {
        let w = try watch()
        XCTAssertTrue(w.startReading(), "the reading thread")
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/a/plain", contents: Data()))
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/x.conflict", contents: Data()))
        XCTAssertEqual(rename(root + "/x.conflict", root + "/b/x.conflict"), 0, "rename into b")
        let quiet = w.finish()
        XCTAssertEqual(
            quiet, [identity("a"), nil, identity("c"), nil], "a and c quiet, b disturbed, missing unwatched")
    }

    func testANameCreatedInPlaceDisturbsItsDirectory() throws {
        let w = try watch()
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/c/y.conflict", contents: Data()))
        XCTAssertEqual(w.finish(), [identity("a"), identity("b"), nil, nil], "c disturbed")
    }

    func testADirectoryMovedAwayIsNotQuiet() throws {
        let w = try watch()
        XCTAssertEqual(rename(root + "/a", root + "/a-old"), 0, "moving a away")
        XCTAssertEqual(mkdir(root + "/a", 0o700), 0, "a new a")
        XCTAssertEqual(w.finish(), [nil, identity("b"), identity("c"), nil], "a no longer quiet")
    }

    func testManyEventsWhileTheThreadRunsAreAllRead() throws {
        let w = try watch()
        XCTAssertTrue(w.startReading(), "the reading thread")
        for i in 0..<3000 {
            XCTAssertTrue(FileManager.default.createFile(atPath: root + "/a/f\(i)", contents: Data()), "file \(i)")
        }
        usleep(100_000)
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/b/late.conflict", contents: Data()))
        XCTAssertEqual(w.finish(), [identity("a"), nil, identity("c"), nil], "only b disturbed")
    }
}
