import Foundation
import TestSupport
import XCTest

/// A vault created and mounted through the real `vaultaire` binary on a real FUSE mount. Every
/// mount is unmounted in `tearDown` — `vaultaire unmount`, then `fusermount3 -u`, then `-uz` — even
/// when the test failed.
final class MountedVault {
    let root: String
    let binary = ProcessRunner.vaultaireBinary
    let runner: ProcessRunner
    var vault: String { root + "/vault" }
    var mountpoint: String { root + "/mnt" }
    var passphraseFile: String { root + "/pw" }

    init() throws {
        root = "/tmp/vaultaire-mount-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root + "/mnt", withIntermediateDirectories: true)
        runner = ProcessRunner(
            environment: [
                "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": root, "XDG_DATA_HOME": root + "/data",
                "VAULTAIRE_ALLOW_WEAK_KDF": "1", "VAULTAIRE_KEYCHAIN": "file", "LC_ALL": "C",
            ], scratch: root)
        FileManager.default.createFile(atPath: passphraseFile, contents: Data("mount test passphrase\n".utf8))
        try vaultaire([
            "init", vault, "--passphrase-file", passphraseFile, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", root + "/phrase",
        ])
    }

    static func requireFUSE() throws {
        if access("/dev/fuse", R_OK | W_OK) != 0 {
            if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
                XCTFail("/dev/fuse is not usable, and VAULTAIRE_REQUIRE_FUSE=1 forbids skipping mount tests")
            }
            throw XCTSkip("!!! /dev/fuse is not usable: mount tests SKIPPED !!!")
        }
    }

    @discardableResult
    func execute(_ path: String, _ args: [String], input: String? = nil) throws -> ProcessRunner.Result {
        try runner.run(path, args, input: input)
    }

    func spawn(_ path: String, _ args: [String]) throws -> pid_t { try runner.spawn(path, args) }

    @discardableResult
    func vaultaire(
        _ args: [String], expect: Int32? = 0, file: StaticString = #filePath, line: UInt = #line
    ) throws -> ProcessRunner.Result {
        let r = try execute(binary, args)
        if let expect {
            XCTAssertEqual(
                r.status, expect, "vaultaire \(args.joined(separator: " ")): \(r.stderr) \(r.stdout)", file: file,
                line: line)
        }
        return r
    }

    /// Runs a bash script with `set -euo pipefail` in the mountpoint; returns its result.
    @discardableResult
    func shell(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws -> ProcessRunner.Result {
        let r = try execute("/bin/bash", ["-c", "set -euo pipefail\ncd '\(mountpoint)'\n" + script])
        XCTAssertEqual(
            r.status, 0, "script failed:\n\(script)\nstdout: \(r.stdout)\nstderr: \(r.stderr)", file: file, line: line)
        return r
    }

    var isMounted: Bool {
        guard let info = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return info.split(separator: "\n").contains {
            $0.split(separator: " ").dropFirst(4).first.map(String.init) == mountpoint
        }
    }

    func mount(_ extra: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        try vaultaire(
            ["mount", vault, mountpoint, "--passphrase-file", passphraseFile] + extra, file: file, line: line)
        XCTAssertTrue(isMounted, "mounted after the command returned", file: file, line: line)
    }

    /// Set by tests that turned FUSE over io_uring on: each unmount first checks that requests were
    /// served through the rings, not through /dev/fuse.
    var expectRings = false
    /// How many unmounts checked the rings.
    private(set) var ringChecks = 0

    func unmount(file: StaticString = #filePath, line: UInt = #line) throws {
        if expectRings {
            ringChecks += 1
            let activity = try ringActivity()
            // Each worker submits twice to start (its entry, its stop watch), then once per request.
            XCTAssertGreaterThan(activity.workers, 0, "io_uring workers", file: file, line: line)
            XCTAssertGreaterThan(
                activity.submissions, 2 * activity.workers, "requests served through the rings", file: file, line: line)
        }
        try vaultaire(["unmount", mountpoint], file: file, line: line)
        XCTAssertFalse(isMounted, file: file, line: line)
    }

    /// Teardown: whatever state the test left, nothing stays mounted.
    func forceUnmount() {
        if isMounted { _ = try? execute(binary, ["unmount", mountpoint]) }
        if isMounted { _ = try? execute("/bin/fusermount3", ["-u", mountpoint]) }
        if isMounted { _ = try? execute("/bin/fusermount3", ["-uz", mountpoint]) }
    }

    /// A tmpfs of `megabytes` at `root/small`, for a full disk; unmounted in the test's teardown.
    func smallDisk(megabytes: Int, test: XCTestCase) throws -> String {
        let small = root + "/small"
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        let mounted = try execute("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", small])
        guard mounted.status == 0 else {
            if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
                XCTFail("cannot mount a tmpfs: \(mounted.stderr)")
            }
            throw XCTSkip("cannot mount a tmpfs here: \(mounted.stderr)")
        }
        test.addTeardownBlock { [runner] in _ = try? runner.run("/bin/umount", ["-l", small]) }
        return small
    }

    /// The vault's content blobs (the 33-character names under blobs/) and their sizes.
    func blobSizes() -> [(name: String, size: Int)] {
        let names = FileManager.default.enumerator(atPath: vault + "/blobs")!.compactMap { $0 as? String }.filter {
            $0.count == 33
        }
        return names.map {
            ($0, (try? FileManager.default.attributesOfItem(atPath: vault + "/blobs/" + $0)[.size] as? Int) ?? 0)
        }
    }

    /// Flips every bit of one byte of a blob: writing a fixed value left the blob intact whenever the
    /// random ciphertext already held that value there (one run in 256).
    func flipByte(ofBlob name: String, at offset: UInt64) throws {
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: vault + "/blobs/" + name))
        try handle.seek(toOffset: offset)
        let original = try XCTUnwrap(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: offset)
        handle.write(Data([original ^ 0xFF]))
        try handle.close()
    }

    func verify(file: StaticString = #filePath, line: UInt = #line) throws {
        try vaultaire(["verify", vault, "--passphrase-file", passphraseFile], file: file, line: line)
    }

    /// The mount process serving this vault (daemonized, so found by its command line), if any.
    func findMountProcess() -> pid_t? {
        let fm = FileManager.default
        let all = (try? fm.contentsOfDirectory(atPath: "/proc")) ?? []
        return all.compactMap { Int32($0) }.filter { pid in
            guard let raw = fm.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let argv = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return argv.count >= 4 && argv[0].hasSuffix("vaultaire") && argv[1] == "mount" && argv[2] == vault
        }.max()
    }

    func mountProcess() throws -> pid_t { try XCTUnwrap(findMountProcess(), "the mount process") }

    /// The mount process's threads named by the io_uring workers, and how many submissions its rings
    /// have taken from it (each served request is committed with one), read from the kernel's fdinfo.
    func ringActivity() throws -> (workers: Int, submissions: Int) {
        let pid = try mountProcess()
        let fm = FileManager.default
        let workers = try ringWorkerThreads().count
        var submissions = 0
        for fd in try fm.contentsOfDirectory(atPath: "/proc/\(pid)/fd") {
            guard (try? fm.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == "anon_inode:[io_uring]",
                let info = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8)
            else { continue }
            for line in info.split(separator: "\n") where line.hasPrefix("SqHead:") {
                submissions += Int(line.split(separator: "\t").last.map(String.init) ?? "") ?? 0
            }
        }
        return (workers, submissions)
    }

    /// The /proc directories of the mount process's io_uring worker threads.
    func ringWorkerThreads() throws -> [String] {
        let pid = try mountProcess()
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")
        return tasks.map { "/proc/\(pid)/task/\($0)" }.filter {
            (try? String(contentsOfFile: $0 + "/comm", encoding: .utf8))?.hasPrefix("vaultaire-ring") == true
        }
    }

    /// Each ring worker's scheduling policy (field 41 of its stat: 0 is SCHED_OTHER, 5 SCHED_IDLE) and
    /// how often, in all, the workers were switched out while runnable.
    func ringWorkerScheduling() throws -> (policies: [Int], preemptions: Int) {
        var policies: [Int] = []
        var preemptions = 0
        for thread in try ringWorkerThreads() {
            let stat = try String(contentsOfFile: thread + "/stat", encoding: .utf8)
            // The name (field 2) is in parentheses and may hold spaces: count fields after its end.
            let nameEnd = try XCTUnwrap(stat.range(of: ")", options: .backwards), "a thread's stat line")
            let fields = stat[nameEnd.upperBound...].split(separator: " ")
            policies.append(fields.count > 41 - 3 ? Int(fields[41 - 3]) ?? -1 : -1)
            let status = try String(contentsOfFile: thread + "/status", encoding: .utf8)
            for line in status.split(separator: "\n") where line.hasPrefix("nonvoluntary_ctxt_switches:") {
                preemptions += Int(line.split(separator: "\t").last.map(String.init) ?? "") ?? 0
            }
        }
        return (policies, preemptions)
    }

    func cleanup() {
        forceUnmount()
        try? FileManager.default.removeItem(atPath: root)
    }
}

/// FUSE over io_uring (Linux 6.14+) is off unless the fuse module's `enable_uring` parameter is on.
/// Tests that need it turn it on and put back what they found.
enum KernelRings {
    static let parameter = "/sys/module/fuse/parameters/enable_uring"

    /// Turns the parameter on; returns its previous value for `restore`. Skips the test on a kernel
    /// without FUSE over io_uring, or fails it where VAULTAIRE_REQUIRE_URING=1 (CI's io_uring lane).
    static func enable() throws -> String {
        guard let found = try? String(contentsOfFile: parameter, encoding: .utf8) else {
            throw unavailable("this kernel has no FUSE over io_uring (\(parameter) is missing; Linux 6.14+)")
        }
        guard FileManager.default.isWritableFile(atPath: parameter) else {
            throw unavailable("\(parameter) is not writable here (needs root)")
        }
        try "Y".write(toFile: parameter, atomically: false, encoding: .utf8)
        return found.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func restore(_ value: String) {
        try? value.write(toFile: parameter, atomically: false, encoding: .utf8)
    }

    /// Why io_uring cannot be tested here: an error that fails the test where CI requires io_uring,
    /// a loud skip elsewhere.
    static func unavailable(_ reason: String) -> Error {
        if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_URING"] == "1" {
            return Unavailable(reason: reason + ", and VAULTAIRE_REQUIRE_URING=1 forbids skipping io_uring tests")
        }
        return XCTSkip("!!! \(reason): io_uring test SKIPPED !!!")
    }

    struct Unavailable: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }
}

class MountTestCase: XCTestCase {
    var mv: MountedVault!

    override func setUpWithError() throws {
        try MountedVault.requireFUSE()
        mv = try MountedVault()
    }

    override func tearDown() {
        mv?.cleanup()
        mv = nil
    }

    /// Runs `body` with FUSE over io_uring switched on (skipping where the kernel lacks it); each
    /// unmount in it checks that the rings served requests.
    func throughIoUring(_ body: () throws -> Void) throws {
        let previous = try KernelRings.enable()
        defer { KernelRings.restore(previous) }
        mv.expectRings = true
        try body()
        XCTAssertGreaterThan(mv.ringChecks, 0, "some unmount checked that the rings served")
    }
}
