import Foundation
import XCTest

/// A vault created and mounted through the real `vaultaire` binary on a real FUSE mount. Every
/// mount is unmounted in `tearDown` — `vaultaire unmount`, then `fusermount3 -u`, then `-uz` — even
/// when the test failed.
final class MountedVault {
    let root: String
    let binary: String
    var environment: [String: String]
    var vault: String { root + "/vault" }
    var mountpoint: String { root + "/mnt" }
    var passphraseFile: String { root + "/pw" }
    private(set) var outputs: [String] = []

    init() throws {
        root = "/tmp/vaultaire-mount-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root + "/mnt", withIntermediateDirectories: true)
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: dir.appendingPathComponent("vaultaire").path) && dir.path != "/" {
            dir = dir.deletingLastPathComponent()
        }
        binary = dir.appendingPathComponent("vaultaire").path
        environment = ["PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": root, "XDG_DATA_HOME": root + "/data",
                       "VAULTAIRE_ALLOW_WEAK_KDF": "1", "VAULTAIRE_KEYCHAIN": "file", "LC_ALL": "C"]
        FileManager.default.createFile(atPath: passphraseFile, contents: Data("mount test passphrase\n".utf8))
        try vaultaire(["init", vault, "--passphrase-file", passphraseFile, "--kdf-iterations", "1000",
                       "--recovery-iterations", "1000", "--recovery-phrase-out", root + "/phrase"])
    }

    static func requireFUSE() throws {
        if access("/dev/fuse", R_OK | W_OK) != 0 {
            if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
                XCTFail("/dev/fuse is not usable, and VAULTAIRE_REQUIRE_FUSE=1 forbids skipping mount tests")
            }
            throw XCTSkip("!!! /dev/fuse is not usable: mount tests SKIPPED !!!")
        }
    }

    struct Result { let status: Int32; let stdout: String; let stderr: String }

    /// Runs a program with posix_spawn, its output going to files (no pipes to fill up, and no reliance on
    /// Foundation's child monitoring, which the mount's daemonizing double fork confuses).
    @discardableResult
    func execute(_ path: String, _ args: [String], input: String? = nil) throws -> Result {
        let out = root + "/.out-\(UInt32.random(in: 0...UInt32.max))", err = out + ".err", inp = out + ".in"
        FileManager.default.createFile(atPath: inp, contents: Data((input ?? "").utf8))
        defer { for f in [out, err, inp] { unlink(f) } }
        let pid = try spawn(path, args, stdin: inp, stdout: out, stderr: err)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let code: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let r = Result(status: code, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
                       stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
        outputs.append(r.stdout + r.stderr)
        return r
    }

    /// Starts a program in the background; the caller kills and reaps it.
    func spawn(_ path: String, _ args: [String], stdin: String = "/dev/null", stdout: String = "/dev/null", stderr: String = "/dev/null") throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([path] + args).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid = pid_t()
        let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard rc == 0 else { throw NSError(domain: "spawn", code: Int(rc)) }
        return pid
    }

    @discardableResult
    func vaultaire(_ args: [String], expect: Int32? = 0, file: StaticString = #filePath, line: UInt = #line) throws -> Result {
        let r = try execute(binary, args)
        if let expect { XCTAssertEqual(r.status, expect, "vaultaire \(args.joined(separator: " ")): \(r.stderr)", file: file, line: line) }
        return r
    }

    /// Runs a bash script with `set -euo pipefail` in the mountpoint; returns its result.
    @discardableResult
    func shell(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws -> Result {
        let r = try execute("/bin/bash", ["-c", "set -euo pipefail\ncd '\(mountpoint)'\n" + script])
        XCTAssertEqual(r.status, 0, "script failed:\n\(script)\nstdout: \(r.stdout)\nstderr: \(r.stderr)", file: file, line: line)
        return r
    }

    var isMounted: Bool {
        guard let info = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return info.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first.map(String.init) == mountpoint }
    }

    func mount(_ extra: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws {
        try vaultaire(["mount", vault, mountpoint, "--passphrase-file", passphraseFile] + extra, file: file, line: line)
        XCTAssertTrue(isMounted, "mounted after the command returned", file: file, line: line)
    }

    func unmount(file: StaticString = #filePath, line: UInt = #line) throws {
        try vaultaire(["unmount", mountpoint], file: file, line: line)
        XCTAssertFalse(isMounted, file: file, line: line)
    }

    /// Teardown: whatever state the test left, nothing stays mounted.
    func forceUnmount() {
        if isMounted { _ = try? execute(binary, ["unmount", mountpoint]) }
        if isMounted { _ = try? execute("/bin/fusermount3", ["-u", mountpoint]) }
        if isMounted { _ = try? execute("/bin/fusermount3", ["-uz", mountpoint]) }
    }

    func verify(file: StaticString = #filePath, line: UInt = #line) throws {
        try vaultaire(["verify", vault, "--passphrase-file", passphraseFile], file: file, line: line)
    }

    func cleanup() {
        forceUnmount()
        try? FileManager.default.removeItem(atPath: root)
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
}
