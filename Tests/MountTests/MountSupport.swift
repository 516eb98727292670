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
        runner = ProcessRunner(environment: ["PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": root, "XDG_DATA_HOME": root + "/data",
                       "VAULTAIRE_ALLOW_WEAK_KDF": "1", "VAULTAIRE_KEYCHAIN": "file", "LC_ALL": "C"], scratch: root)
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

    @discardableResult
    func execute(_ path: String, _ args: [String], input: String? = nil) throws -> ProcessRunner.Result {
        try runner.run(path, args, input: input)
    }

    func spawn(_ path: String, _ args: [String]) throws -> pid_t { try runner.spawn(path, args) }

    @discardableResult
    func vaultaire(_ args: [String], expect: Int32? = 0, file: StaticString = #filePath, line: UInt = #line) throws -> ProcessRunner.Result {
        let r = try execute(binary, args)
        if let expect { XCTAssertEqual(r.status, expect, "vaultaire \(args.joined(separator: " ")): \(r.stderr) \(r.stdout)", file: file, line: line) }
        return r
    }

    /// Runs a bash script with `set -euo pipefail` in the mountpoint; returns its result.
    @discardableResult
    func shell(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws -> ProcessRunner.Result {
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
