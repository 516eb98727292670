import Foundation
import TestSupport
import XCTest

/// A vault used on two machines at once through a sync folder (issue 23, point 5): the sync client's
/// conflict copies are found at open, every writable command is refused (exit 25) with nothing in the
/// vault directory changed, reading works with one warning, and `verify` names each copy.
///
/// Two machines are two copies of the vault directory and two keychain directories holding the same
/// device salt (machine B enrolled), so each machine keeps its own record of the index generation.
final class SyncConflictTests: XCTestCase {
    static let conflictCode: Int32 = 25

    struct Machines {
        let w: CLIWorld
        let pw: String
        /// The vault as machine A has it; after `merge`, the sync folder's result.
        let a: String
        let b: String
        let environmentB: [String: String]
    }

    /// A vault with one file, copied to two machines, each then changed on its own: A with `changeA`,
    /// B with `changeB`, commands in which VAULT, PW, A_FILE, B_FILE and PW_B stand for that machine's
    /// vault, the passphrase file, a file for each machine and a second passphrase file.
    func split(changeA: [String], changeB: [String]) throws -> Machines {
        let w = try CLIWorld()
        let pw = w.file("pw", "correct horse battery\n")
        let original = w.root + "/original"
        try w.run([
            "init", original, "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
            "--recovery-phrase-out", w.root + "/phrase",
        ])
        try w.run(["put", original, w.file("common.txt", "on both machines\n"), "/common.txt", "--passphrase-file", pw])
        let fm = FileManager.default
        let a = w.root + "/a/Vault"
        let b = w.root + "/b/Vault"
        for dir in [a, b] {
            try fm.createDirectory(
                atPath: (dir as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try fm.copyItem(atPath: original, toPath: dir)
        }
        try fm.copyItem(atPath: w.root + "/data", toPath: w.root + "/data-b")
        let m = Machines(w: w, pw: pw, a: a, b: b, environmentB: ["XDG_DATA_HOME": w.root + "/data-b"])
        let words = [
            "PW": pw, "A_FILE": w.file("a.txt", "written on A\n"), "B_FILE": w.file("b.txt", "written on B\n"),
            "PW_B": w.file("pw-b", "the passphrase set on B\n"),
        ]
        try w.run(changeA.map { $0 == "VAULT" ? a : words[$0] ?? $0 })
        try w.run(changeB.map { $0 == "VAULT" ? b : words[$0] ?? $0 }, environment: m.environmentB)
        return m
    }

    /// What a sync client does with B's version arriving at A: `conflicting` files of B land beside
    /// A's under `conflictName`, B's files A lacks (new blobs: new names, no conflict) are copied over.
    func merge(_ m: Machines, conflicting: [String], conflictName: (String) -> String) throws {
        let fm = FileManager.default
        for relative in conflicting {
            try fm.copyItem(atPath: m.b + "/" + relative, toPath: m.a + "/" + conflictName(relative))
        }
        for relative in try fm.subpathsOfDirectory(atPath: m.b) where !fm.fileExists(atPath: m.a + "/" + relative) {
            try fm.copyItem(atPath: m.b + "/" + relative, toPath: m.a + "/" + relative)
        }
    }

    /// Every entry of `dir` with its type and size, and a SHA-256 of every file.
    func listing(_ dir: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = [
            "-c",
            "cd \"$1\" && find . -printf '%y %s %p\\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum",
            "sh", dir,
        ]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// The writable commands, each of which must refuse the merged vault.
    func writableCommands(_ m: Machines) throws -> [[String]] {
        let w = m.w
        let a = m.a
        let pw = m.pw
        try FileManager.default.createDirectory(atPath: w.root + "/mnt", withIntermediateDirectories: true)
        return [
            ["put", a, w.file("new.txt", "new\n"), "/new.txt", "--passphrase-file", pw],
            ["mkdir", a, "/d", "--passphrase-file", pw],
            ["rm", a, "/common.txt", "--passphrase-file", pw],
            ["verify", a, "--repair", "--passphrase-file", pw],
            [
                "passwd", a, "--passphrase-file", pw, "--new-passphrase-file",
                w.file("pw2", "another good passphrase\n"),
            ],
            ["recover", a, "--recovery-phrase-file", w.root + "/phrase", "--new-passphrase-file", w.root + "/pw2"],
            // Should a mount ever be let through, the idle limit ends its daemon, and with it the wait for its output.
            ["mount", a, w.root + "/mnt", "--passphrase-file", pw, "--idle", "1"],
        ]
    }

    func testAJournalWrittenOnTwoMachinesIsRefusedForWritingAndListedByVerify() throws {
        let m = try split(
            changeA: ["put", "VAULT", "A_FILE", "/from-a.txt", "--passphrase-file", "PW"],
            changeB: ["put", "VAULT", "B_FILE", "/from-b.txt", "--passphrase-file", "PW"])
        let copy = "index/journal.sync-conflict-20261204-101010-ABCDEFG"
        try merge(m, conflicting: ["index/journal"]) { _ in copy }
        // The merge also brought B's new blob, which A's index (kept) does not name.
        let fm = FileManager.default
        let newBlobs = try fm.subpathsOfDirectory(atPath: m.b).filter {
            $0.hasPrefix("blobs/") && $0.count == "blobs/xx/".count + 30
                && !fm.fileExists(atPath: m.w.root + "/original/" + $0)
        }
        XCTAssertEqual(newBlobs.count, 1, "B made one new blob: \(newBlobs)")
        let newBlob = try XCTUnwrap(newBlobs.first)
        let newBlobSize = try fm.attributesOfItem(atPath: m.a + "/" + newBlob)[.size] as! Int
        let before = try listing(m.a)

        for command in try writableCommands(m) {
            let r = try m.w.run(command, expect: nil)
            XCTAssertEqual(r.status, Self.conflictCode, "\(command[0]): \(r.stderr)")
        }
        let refusal = try m.w.run(["mkdir", m.a, "/d", "--passphrase-file", m.pw], expect: nil)
        XCTAssertEqual(
            refusal.errorLines.map(String.init),
            [
                "Error: this vault was written on two machines at once: the sync folder holds 1 conflict copy and 1 blob "
                    + "newer than the index (a sync client still bringing the other machine's index, or one that kept this "
                    + "machine's). Nothing has been changed; writing is refused until the copies are resolved (README: "
                    + "\"Using a vault in a sync folder\"); ls, get, verify and mount --read-only still work.",
                "  \(m.a)/\(copy): a copy of the index journal, holding the other machine's changes (index/journal)",
                "  \(m.a)/\(newBlob): contents written after the index, of a file the index does not name (\(newBlobSize) bytes)",
            ])
        XCTAssertEqual(try listing(m.a), before, "a refused command changed the vault directory")

        let ls = try m.w.run(["ls", m.a, "/", "--passphrase-file", m.pw])
        XCTAssertEqual(
            ls.errorLines.map(String.init),
            [
                "Warning: this vault was written on two machines at once: the sync folder holds 1 conflict copy and 1 blob "
                    + "newer than the index (a sync client may still be bringing the other machine's index); reading works, "
                    + "writing is refused until resolved ('vaultaire verify' lists them)"
            ])

        let verify = try m.w.run(["verify", m.a, "--passphrase-file", m.pw], expect: Self.conflictCode)
        XCTAssertTrue(verify.stdout.contains("CONFLICT \(m.a)/\(copy): a copy of the index journal"), verify.stdout)

        // Nothing is lost: B's change is in the copy, which opens in place of A's journal (in a backup).
        let backup = m.w.root + "/both"
        try FileManager.default.copyItem(atPath: m.a, toPath: backup)
        try FileManager.default.moveItem(atPath: backup + "/index/journal", toPath: m.w.root + "/journal-of-a")
        try FileManager.default.moveItem(atPath: backup + "/" + copy, toPath: backup + "/index/journal")
        let other = try m.w.run(["ls", backup, "/", "--passphrase-file", m.pw])
        XCTAssertTrue(other.stdout.contains("from-b.txt"), other.stdout)
    }

    func testAHeaderWrittenOnTwoMachinesIsRefusedForWritingAndListedByVerify() throws {
        let m = try split(
            changeA: ["put", "VAULT", "A_FILE", "/from-a.txt", "--passphrase-file", "PW"],
            changeB: ["passwd", "VAULT", "--passphrase-file", "PW", "--new-passphrase-file", "PW_B"])
        let copy = "vault.header (host's conflicted copy 2026-12-04)"
        try merge(m, conflicting: ["vault.header"]) { _ in copy }
        let before = try listing(m.a)

        for command in try writableCommands(m) {
            let r = try m.w.run(command, expect: nil)
            XCTAssertEqual(r.status, Self.conflictCode, "\(command[0]): \(r.stderr)")
        }
        XCTAssertEqual(try listing(m.a), before, "a refused command changed the vault directory")

        let ls = try m.w.run(["ls", m.a, "/", "--passphrase-file", m.pw])
        XCTAssertEqual(
            ls.errorLines.filter { $0.hasPrefix("Warning: this vault was written on two machines at once") }.count, 1,
            ls.stderr)

        let verify = try m.w.run(["verify", m.a, "--passphrase-file", m.pw], expect: Self.conflictCode)
        XCTAssertTrue(verify.stdout.contains("CONFLICT \(m.a)/\(copy): a copy of the vault header"), verify.stdout)
    }
}

extension SyncConflictTests {
    /// A blob changed on both machines through their mounts — /common.txt appended to in place on A
    /// and on B — and a sync client leaving B's version of the blob beside A's as a conflict copy:
    /// `verify` names the copy by the file it holds, and nothing of either version is lost.
    func testACopyOfABlobNamesTheFileItHolds() throws {
        try requireFUSE()
        let m = try split(
            changeA: ["ls", "VAULT", "/", "--passphrase-file", "PW"],
            changeB: ["ls", "VAULT", "/", "--passphrase-file", "PW"])
        let fm = FileManager.default
        let blob = try XCTUnwrap(
            try fm.subpathsOfDirectory(atPath: m.a).first {
                $0.hasPrefix("blobs/") && $0.count == "blobs/xx/".count + 30
            })
        let before = try Data(contentsOf: URL(fileURLWithPath: m.a + "/" + blob))
        for (vault, environment, text) in [(m.a, [:], "appended on A\n"), (m.b, m.environmentB, "appended on B\n")] {
            let mountpoint = vault + "-mnt"
            try fm.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
            defer { unmountForSure(mountpoint, m.w) }
            // Through files, not pipes: the mount's daemon keeps its standard output and error open.
            let runner = ProcessRunner(environment: m.w.environment.merging(environment) { $1 }, scratch: m.w.root)
            let mounted = try runner.run(m.w.binary, ["mount", vault, mountpoint, "--passphrase-file", m.pw])
            XCTAssertEqual(mounted.status, 0, mounted.stderr)
            let handle = try XCTUnwrap(FileHandle(forWritingAtPath: mountpoint + "/common.txt"))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(text.utf8))
            try handle.close()
            let unmounted = try runner.run(m.w.binary, ["unmount", mountpoint])
            XCTAssertEqual(unmounted.status, 0, unmounted.stderr)
        }
        let ofA = try Data(contentsOf: URL(fileURLWithPath: m.a + "/" + blob))
        let ofB = try Data(contentsOf: URL(fileURLWithPath: m.b + "/" + blob))
        XCTAssertNotEqual(ofA, before, "A changed the blob in place")
        XCTAssertNotEqual(ofA, ofB, "the two machines' versions differ")
        let copy = m.a + "/" + blob + ".sync-conflict-20261204-101010-ABCDEFG"
        try merge(m, conflicting: [blob]) { $0 + ".sync-conflict-20261204-101010-ABCDEFG" }

        let verify = try m.w.run(["verify", m.a, "--passphrase-file", m.pw], expect: Self.conflictCode)
        XCTAssertTrue(verify.stdout.contains(": a copy of the contents of /common.txt (\(blob))"), verify.stdout)
        let onA = try m.w.run(["get", m.a, "/common.txt", "-", "--passphrase-file", m.pw])
        XCTAssertEqual(onA.stdout, "on both machines\nappended on A\n")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: copy)), ofB, "B's version is kept whole")
        let onB = try m.w.run(["get", m.b, "/common.txt", "-", "--passphrase-file", m.pw], environment: m.environmentB)
        XCTAssertEqual(onB.stdout, "on both machines\nappended on B\n")
    }

    func requireFUSE() throws {
        guard access("/dev/fuse", R_OK | W_OK) == 0 else {
            if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
                XCTFail("/dev/fuse is not usable, and VAULTAIRE_REQUIRE_FUSE=1 forbids skipping mount tests")
            }
            throw XCTSkip("!!! /dev/fuse is not usable: mount tests SKIPPED !!!")
        }
    }

    /// Teardown of a mount this test made, whatever happened: `vaultaire unmount`, then fusermount3.
    func unmountForSure(_ mountpoint: String, _ w: CLIWorld) {
        func mounted() -> Bool {
            let info = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
            return info.split(separator: "\n").contains {
                $0.split(separator: " ").dropFirst(4).first == Substring(mountpoint)
            }
        }
        if mounted() {
            _ = try? ProcessRunner(environment: w.environment, scratch: w.root).run(w.binary, ["unmount", mountpoint])
        }
        for args in [["-u", mountpoint], ["-uz", mountpoint]] where mounted() {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/fusermount3")
            p.arguments = args
            try? p.run()
            p.waitUntilExit()
        }
    }
}

extension SyncConflictTests {
    /// A newest-wins sync client (no conflict copies) keeps A's index, written last, and brings B's new
    /// blob beside it: B's file is a blob no record names, exactly like a crash leftover. `verify
    /// --repair` must not delete it: it goes, whole, to lost+found/, from where B's index names it again.
    func testRepairAfterANewestWinsMergeKeepsTheOtherMachinesFile() throws {
        let m = try split(
            changeA: ["put", "VAULT", "A_FILE", "/from-a.txt", "--passphrase-file", "PW"],
            changeB: ["put", "VAULT", "B_FILE", "/from-b.txt", "--passphrase-file", "PW"])
        try merge(m, conflicting: []) { $0 }
        let fm = FileManager.default
        let blobsOfA = Set(try fm.subpathsOfDirectory(atPath: m.w.root + "/a/Vault").filter { $0.hasPrefix("blobs/") })
        let strays = try fm.subpathsOfDirectory(atPath: m.b).filter {
            $0.hasPrefix("blobs/") && $0.count == "blobs/xx/".count + 30
        }.filter { !fm.fileExists(atPath: m.w.root + "/original/" + $0) }
        XCTAssertEqual(strays.count, 1, "B made one new blob: \(strays)")
        let stray = strays[0]
        XCTAssertTrue(blobsOfA.contains(stray), "the merge brought B's blob to A")

        // A's index, kept, is older than B's blob it does not name: a conflict until repaired.
        let verify = try m.w.run(["verify", m.a, "--passphrase-file", m.pw], expect: Self.conflictCode)
        XCTAssertTrue(verify.stderr.contains("1 blob(s) belong to no file"), verify.stderr)
        XCTAssertTrue(
            verify.stdout.contains("CONFLICT \(m.a)/\(stray): contents written after the index"), verify.stdout)
        let repair = try m.w.run(["verify", m.a, "--repair", "--passphrase-file", m.pw])
        XCTAssertTrue(repair.stderr.contains("moved 1 blob(s) with contents"), repair.stderr)
        let kept =
            m.a + "/lost+found/"
            + stray.replacingOccurrences(of: "blobs/", with: "")
            .replacingOccurrences(of: "/", with: "")
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: kept)),
            try Data(contentsOf: URL(fileURLWithPath: m.b + "/" + stray)),
            "B's blob is kept whole")
        try m.w.run(["verify", m.a, "--passphrase-file", m.pw])

        // Nothing is lost: B's index names the kept blob once it is back in blobs/.
        let restored = m.w.root + "/restored"
        try fm.copyItem(atPath: m.a, toPath: restored)
        for name in ["snapshot", "journal"] {
            try fm.removeItem(atPath: restored + "/index/" + name)
            try fm.copyItem(atPath: m.b + "/index/" + name, toPath: restored + "/index/" + name)
        }
        try fm.moveItem(
            atPath: restored + "/lost+found/" + (kept as NSString).lastPathComponent, toPath: restored + "/" + stray)
        let out = m.w.root + "/from-b.out"
        try m.w.run(["get", restored, "/from-b.txt", out, "--passphrase-file", m.pw], environment: m.environmentB)
        XCTAssertEqual(try String(contentsOfFile: out, encoding: .utf8), "written on B\n")
    }
}

extension SyncConflictTests {
    /// B's new blobs (with their fan-out directories) as a sync client brings them to A: put in place by
    /// renaming, the index not yet.
    func bringBlobs(_ m: Machines) throws -> [String] {
        let fm = FileManager.default
        var brought: [String] = []
        for relative in try fm.subpathsOfDirectory(atPath: m.b + "/blobs")
        where !fm.fileExists(atPath: m.a + "/blobs/" + relative) {
            try fm.copyItem(atPath: m.b + "/blobs/" + relative, toPath: m.a + "/blobs/" + relative + ".part")
            try fm.moveItem(atPath: m.a + "/blobs/" + relative + ".part", toPath: m.a + "/blobs/" + relative)
            brought.append("blobs/" + relative)
        }
        return brought
    }

    /// The sync client brings B's index files, after the blobs.
    func bringIndex(_ m: Machines) throws {
        let fm = FileManager.default
        for name in ["snapshot", "journal"] {
            try fm.removeItem(atPath: m.a + "/index/" + name)
            try fm.copyItem(atPath: m.b + "/index/" + name, toPath: m.a + "/index/" + name)
        }
    }

    /// A vault used by two machines one at a time: B's new file reaches A's sync folder as its blob
    /// first, its index later. In between the index is older than a blob it does not name: writing is
    /// refused with nothing changed, reading works; once the index arrives, everything opens.
    func testBlobsThatArriveBeforeTheirIndexRefuseWritingUntilTheIndexArrives() throws {
        let m = try split(
            changeA: ["ls", "VAULT", "/", "--passphrase-file", "PW"],
            changeB: ["put", "VAULT", "B_FILE", "/from-b.txt", "--passphrase-file", "PW"])
        let brought = try bringBlobs(m)
        XCTAssertEqual(brought.count, 1, "B made one new blob: \(brought)")
        let before = try listing(m.a)

        // passwd and recover write only vault.header, which blobs ahead of the index do not concern.
        for command in try writableCommands(m) where !["verify", "passwd", "recover"].contains(command[0]) {
            let r = try m.w.run(command, expect: nil)
            XCTAssertEqual(r.status, Self.conflictCode, "\(command[0]): \(r.stderr)")
        }
        let refusal = try m.w.run(["mkdir", m.a, "/d", "--passphrase-file", m.pw], expect: nil)
        XCTAssertTrue(
            refusal.stderr.contains("the sync folder holds 1 blob newer than the index"), refusal.stderr)
        XCTAssertTrue(
            refusal.stderr.contains(
                "  \(m.a)/\(brought[0]): contents written after the index, of a file the index does not name"),
            refusal.stderr)
        XCTAssertEqual(try listing(m.a), before, "a refused command changed the vault directory")

        let ls = try m.w.run(["ls", m.a, "/", "--passphrase-file", m.pw])
        XCTAssertTrue(ls.stdout.contains("common.txt"), ls.stdout)
        XCTAssertTrue(ls.stderr.contains("1 blob newer than the index"), ls.stderr)
        let verify = try m.w.run(["verify", m.a, "--passphrase-file", m.pw], expect: Self.conflictCode)
        XCTAssertTrue(
            verify.stdout.contains("CONFLICT \(m.a)/\(brought[0]): contents written after the index"), verify.stdout)

        try bringIndex(m)
        try m.w.run(["mkdir", m.a, "/d", "--passphrase-file", m.pw])
        let out = m.w.root + "/from-b.out"
        try m.w.run(["get", m.a, "/from-b.txt", out, "--passphrase-file", m.pw])
        XCTAssertEqual(try String(contentsOfFile: out, encoding: .utf8), "written on B\n")
        let common = m.w.root + "/common.out"
        try m.w.run(["get", m.a, "/common.txt", common, "--passphrase-file", m.pw])
        XCTAssertEqual(try String(contentsOfFile: common, encoding: .utf8), "on both machines\n")
        try m.w.run(["verify", m.a, "--passphrase-file", m.pw])
    }

    /// A file's blob replaced by contents its record does not expect (here another file's blob under its
    /// name, as a sync client brings a blob the other machine rewrote) is newer than the index: writing is
    /// refused; `verify --repair` keeps that blob whole in lost+found/ and the vault opens again.
    func testABlobItsRecordDoesNotExpectIsKeptByRepair() throws {
        let m = try split(
            changeA: ["ls", "VAULT", "/", "--passphrase-file", "PW"],
            changeB: ["put", "VAULT", "B_FILE", "/from-b.txt", "--passphrase-file", "PW"])
        let fm = FileManager.default
        let original = try fm.subpathsOfDirectory(atPath: m.a + "/blobs").filter { $0.count == 2 + 1 + 30 }
        XCTAssertEqual(original.count, 1, "A has one blob: \(original)")
        let newer = try fm.subpathsOfDirectory(atPath: m.b + "/blobs").filter {
            $0.count == 33 && !fm.fileExists(atPath: m.a + "/blobs/" + $0)
        }
        XCTAssertEqual(newer.count, 1, "B made one new blob: \(newer)")
        let target = m.a + "/blobs/" + original[0]
        try fm.copyItem(atPath: m.b + "/blobs/" + newer[0], toPath: target + ".part")
        try fm.removeItem(atPath: target)
        try fm.moveItem(atPath: target + ".part", toPath: target)
        let arrived = try Data(contentsOf: URL(fileURLWithPath: target))

        let refusal = try m.w.run(["mkdir", m.a, "/d", "--passphrase-file", m.pw], expect: Self.conflictCode)
        XCTAssertTrue(
            refusal.stderr.contains(
                "  \(target): contents of /common.txt written after the index, not the version the index records"),
            refusal.stderr)

        let repair = try m.w.run(["verify", m.a, "--repair", "--passphrase-file", m.pw], expect: nil)
        XCTAssertTrue(repair.stderr.contains("Repaired: copied 1 file(s) newer than the index"), repair.stderr)
        let kept = m.a + "/lost+found/" + original[0].replacingOccurrences(of: "/", with: "") + ".newer-than-index"
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: kept)), arrived, "the arrived blob is kept whole")
        // The repair leaves nothing for the next open to find: the record and its blob agree again.
        let check = try m.w.run(["verify", m.a, "--passphrase-file", m.pw], expect: nil)
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        let out = m.w.root + "/common-after-repair.txt"
        let get = try m.w.run(["get", m.a, "/common.txt", out, "--passphrase-file", m.pw], expect: nil)
        XCTAssertEqual(get.status, 0, get.stderr)
        try m.w.run(["mkdir", m.a, "/d", "--passphrase-file", m.pw])
        let ls = try m.w.run(["ls", m.a, "/", "--passphrase-file", m.pw])
        XCTAssertTrue(ls.stdout.contains("d"), ls.stdout)
    }
}
