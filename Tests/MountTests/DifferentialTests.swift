import Foundation
import XCTest

/// Applies the same thousands of random operations to the mount and to a plain directory, and compares
/// both trees (content, sizes, kinds, permissions, link counts) after every batch, and again after an
/// unmount and a remount.
final class DifferentialTests: MountTestCase {
    struct Tree {
        let root: String
        func path(_ p: String) -> String { root + "/" + p }
    }

    /// Both trees get the same call; the results (success or errno) must agree too.
    func both(
        _ a: Tree, _ b: Tree, _ what: String, _ body: (Tree) -> Int32, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        let ra = body(a)
        let ea = ra < 0 ? errno : 0
        let rb = body(b)
        let eb = rb < 0 ? errno : 0
        XCTAssertEqual(ra < 0, rb < 0, "\(what): mount \(ra)/\(ea), plain \(rb)/\(eb)", file: file, line: line)
        if ra < 0 && rb < 0 { XCTAssertEqual(ea, eb, "\(what): errno", file: file, line: line) }
    }

    func snapshot(_ t: Tree) throws -> [String: String] {
        var out: [String: String] = [:]
        let fm = FileManager.default
        guard let e = fm.enumerator(atPath: t.root) else { return out }
        for case let rel as String in e {
            var st = stat()
            lstat(t.path(rel), &st)
            var desc = "mode=\(String(st.st_mode, radix: 8)) nlink=\(st.st_nlink)"
            if st.st_mode & S_IFMT == S_IFREG {
                let data = fm.contents(atPath: t.path(rel)) ?? Data()
                desc +=
                    " size=\(st.st_size) sum=\(data.reduce(into: UInt64(1_469_598_103_934_665_603)) { $0 = ($0 ^ UInt64($1)) &* 1_099_511_628_211 })"
            } else if st.st_mode & S_IFMT == S_IFDIR {
                desc += " entries=\((try? fm.contentsOfDirectory(atPath: t.path(rel)).count) ?? -1)"
            }
            out[rel] = desc
        }
        return out
    }

    func testRandomOperationsMatchAPlainDirectory() throws {
        try randomOperationsMatchAPlainDirectory()
    }

    /// The same, with every request served through FUSE over io_uring.
    func testRandomOperationsMatchAPlainDirectoryThroughIoUring() throws {
        try throughIoUring {
            try randomOperationsMatchAPlainDirectory {
                let activity = try self.mv.ringActivity()
                XCTAssertGreaterThan(
                    activity.submissions, 2 * activity.workers + 3000, "thousands of requests served through the rings")
            }
        }
    }

    func randomOperationsMatchAPlainDirectory(whileMounted check: () throws -> Void = {}) throws {
        try mv.mount()
        let plainRoot = mv.root + "/plain"
        try FileManager.default.createDirectory(atPath: plainRoot, withIntermediateDirectories: true)
        let a = Tree(root: mv.mountpoint)
        let b = Tree(root: plainRoot)
        let names = ["a", "b", "c", "d/a", "d/b", "d/e/a", "e"]
        let dirs = ["d", "d/e", "f"]
        var rng = SystemRandomNumberGenerator()
        var operations = 0
        let umask022 = umask(0o022)
        defer { umask(umask022) }
        for batch in 0..<12 {
            for _ in 0..<250 {
                operations += 1
                let n = names.randomElement(using: &rng)!
                let m = names.randomElement(using: &rng)!
                switch Int.random(in: 0..<12, using: &rng) {
                case 0, 1, 2:
                    let offset = off_t(Int.random(in: 0..<200_000, using: &rng))
                    let data = (0..<Int.random(in: 1..<40_000, using: &rng)).map { _ in
                        UInt8.random(in: 0...255, using: &rng)
                    }
                    both(a, b, "write \(n)@\(offset)") { t in
                        let fd = open(t.path(n), O_WRONLY | O_CREAT, 0o644)
                        if fd < 0 { return -1 }
                        defer { close(fd) }
                        return data.withUnsafeBytes {
                            Int32(truncatingIfNeeded: pwrite(fd, $0.baseAddress, $0.count, offset))
                        }
                    }
                case 3:
                    let size = off_t(Int.random(in: 0..<150_000, using: &rng))
                    both(a, b, "truncate \(n)") { truncate($0.path(n), size) }
                case 4: both(a, b, "rename \(n) \(m)") { rename($0.path(n), $0.path(m)) }
                case 5: both(a, b, "link \(n) \(m)") { link($0.path(n), $0.path(m)) }
                case 6: both(a, b, "unlink \(n)") { unlink($0.path(n)) }
                case 7:
                    let d = dirs.randomElement(using: &rng)!
                    both(a, b, "mkdir \(d)") { mkdir($0.path(d), 0o755) }
                case 8:
                    let d = dirs.randomElement(using: &rng)!
                    both(a, b, "rmdir \(d)") { rmdir($0.path(d)) }
                case 9:
                    let d = dirs.randomElement(using: &rng)!
                    both(a, b, "rename dir \(d) \(m)") { rename($0.path(d), $0.path(m)) }
                case 10:
                    let mode = mode_t([0o600, 0o644, 0o755, 0o640].randomElement(using: &rng)!)
                    both(a, b, "chmod \(n)") { chmod($0.path(n), mode) }
                default:
                    both(a, b, "append \(n)") { t in
                        let fd = open(t.path(n), O_WRONLY | O_APPEND)
                        if fd < 0 { return -1 }
                        defer { close(fd) }
                        return Int32(truncatingIfNeeded: write(fd, "appended\n", 9))
                    }
                }
            }
            let (sa, sb) = (try snapshot(a), try snapshot(b))
            let differing = Set(sa.keys).union(sb.keys).filter { sa[$0] != sb[$0] }.sorted()
            XCTAssertEqual(
                differing, [],
                "after batch \(batch): "
                    + differing.map { "\($0): mount \(sa[$0] ?? "-") plain \(sb[$0] ?? "-")" }.joined(separator: "; "))
        }
        let before = try snapshot(b)
        try check()
        try mv.unmount()
        try mv.verify()
        try mv.mount()
        XCTAssertEqual(try snapshot(a), before, "trees differ after unmount and remount")
        print("differential: \(operations) random operations, 12 batches compared, then compared again after remount")
        try mv.unmount()
    }
}
