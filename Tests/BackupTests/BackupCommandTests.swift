import Foundation
import Glibc
import VaultBackup
import VaultCrypto
import VaultFS
import VaultFormat
import VaultKeychain
import XCTest

/// `vaultaire backup` on rclone's local backend: pruning, the vault lock, errors, and what leaves
/// the machine.
final class BackupCommandTests: XCTestCase {
    func testPruningKeepsExactlyWhatTheKeptSnapshotsNeed() throws {
        let w = try BackupWorld()
        let remote = w.root + "/remote"
        for i in 1...4 {
            try w.put(["/file-\(i).bin": BackupWorld.random(20_000 + i)])
            if i > 1 { try w.vaultaire(["rm", w.vault, "/file-\(i - 1).bin", "--passphrase-file", w.passphraseFile]) }
            try w.vaultaire(["backup", w.vault, remote, "--keep", "2", "--passphrase-file", w.passphraseFile])
        }
        let files = try w.remoteFiles(remote)
        XCTAssertEqual(
            Set(files.filter { $0.hasPrefix("snapshots/") }), ["snapshots/0000000003", "snapshots/0000000004"])

        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        let keychain = Keychain(backend: FileKeychain(directory: w.root + "/device-0/vaultaire/keychain"))
        let credential = Credential.passphrase(SecureBytes(copying: Array("backup test passphrase".utf8)))
        let master = try VaultAccess.unwrapMasterKey(at: w.vault, credential: credential, keychain: keychain)
        let kept = try [3, 4].map { id in
            try Manifest(
                opening: Array(try Data(contentsOf: URL(fileURLWithPath: remote + "/snapshots/000000000\(id)"))),
                master: master)
        }
        XCTAssertEqual(
            Set(files.filter { $0.hasPrefix("objects/") }),
            Set(kept.flatMap { $0.entries.map { BackupFormat.objectPath($0.hash) } }))
        XCTAssertEqual(
            Set(files.filter { $0.hasPrefix("keys/") }), Set(kept.map { BackupFormat.keyPath($0.headerHash) }))
        try w.vaultaire(["backup", "--verify", remote, "--snapshot", "3", "--passphrase-file", w.passphraseFile])
    }

    func testAVaultMountedReadWriteIsRefusedAndReadOnlyIsBackedUp() throws {
        guard access("/dev/fuse", R_OK | W_OK) == 0 else {
            if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
                XCTFail("/dev/fuse is not usable")
            }
            throw XCTSkip("!!! /dev/fuse is not usable: mounted-backup test SKIPPED !!!")
        }
        let w = try BackupWorld()
        let mountpoint = w.root + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try w.vaultaire(["mount", w.vault, mountpoint, "--passphrase-file", w.passphraseFile])
        defer { _ = try? w.runner.run("/usr/bin/fusermount3", ["-u", "-z", mountpoint]) }
        try Data("written through the mount".utf8).write(to: URL(fileURLWithPath: mountpoint + "/live.txt"))
        let refused = try w.vaultaire(
            ["backup", w.vault, w.root + "/remote", "--passphrase-file", w.passphraseFile], expect: 19)
        XCTAssertTrue(
            refused.errorLines.count == 1
                && refused.errorLines[0].hasPrefix("Error: local \(w.vault) is open read-write"), refused.stderr)
        try w.vaultaire(["unmount", mountpoint])

        try w.vaultaire(["mount", w.vault, mountpoint, "--read-only", "--passphrase-file", w.passphraseFile])
        try w.vaultaire(["backup", w.vault, w.root + "/remote", "--passphrase-file", w.passphraseFile])
        try w.vaultaire(["unmount", mountpoint])
        let device = w.freshDevice()
        try w.vaultaire(
            ["restore", w.root + "/remote", w.root + "/restored", "--passphrase-file", w.passphraseFile], device: device
        )
        XCTAssertEqual(
            try w.tree(of: w.root + "/restored", device: device), ["/live.txt": Data("written through the mount".utf8)])
    }

    func testBadInputGetsOneLineAndItsOwnExitCode() throws {
        let w = try BackupWorld()
        let remote = w.root + "/remote"
        try w.put(["/a": Data("a".utf8)])
        try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let notEmpty = w.root + "/not-empty"
        try FileManager.default.createDirectory(atPath: notEmpty + "/x", withIntermediateDirectories: true)
        let closedPort = try freePort()
        let otherVault = w.root + "/other-vault"
        try w.vaultaire([
            "init", otherVault, "--passphrase-file", w.passphraseFile, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/other-phrase",
        ])
        let other = try w.vaultaire(["backup", otherVault, remote, "--passphrase-file", w.passphraseFile], expect: 18)
        XCTAssertEqual(other.errorLines, ["Error: remote \(remote): holds the backups of another vault"])
        let cases: [([String], Int32, String)] = [
            (["backup", w.vault, remote, "--keep", "0", "--passphrase-file", w.passphraseFile], 64, "--keep"),
            (
                ["backup", w.root, remote, "--passphrase-file", w.passphraseFile], 6,
                "local \(w.root) is not a Vaultaire vault"
            ),
            (
                ["restore", w.root + "/nothing-here", w.root + "/r1", "--passphrase-file", w.passphraseFile], 17,
                "remote \(w.root)/nothing-here"
            ),
            (
                ["restore", remote, notEmpty, "--passphrase-file", w.passphraseFile], 18,
                "local \(notEmpty) is not empty"
            ),
            (
                ["restore", remote, w.root + "/r2", "--snapshot", "9", "--passphrase-file", w.passphraseFile], 17,
                "no snapshot 9"
            ),
            (
                [
                    "backup", "--list", ":sftp,host=127.0.0.1,port=\(closedPort),user=nobody,key_file=/dev/null:x",
                    "--passphrase-file", w.passphraseFile,
                ], 23, "unreachable"
            ),
        ]
        for (args, status, text) in cases {
            let r = try w.vaultaire(args, device: w.freshDevice(), expect: status)
            // One line (a usage error adds the "See 'vaultaire backup --help'." pointer).
            XCTAssertTrue(
                r.errorLines.count == (status == 64 ? 2 : 1) && r.errorLines[0].hasPrefix("Error: ")
                    && r.errorLines[0].contains(text),
                "\(args): \(r.stderr)")
        }
    }

    func testNothingPlainLeavesTheMachine() throws {
        let w = try BackupWorld()
        let remote = w.root + "/remote"
        let marker = "PLAINTEXT-MARKER-4c1e"
        try w.put(["/secret-plans-\(marker).txt": Data(String(repeating: marker, count: 100).utf8)])
        let r = try w.vaultaire(["backup", w.vault, remote, "--passphrase-file", w.passphraseFile])
        let grep = try w.runner.run(
            "/bin/grep", ["-r", "-l", "-a", "-e", marker, "-e", "backup test passphrase", remote])
        XCTAssertEqual(grep.stdout, "", "plaintext on the remote")
        XCTAssertFalse(w.runner.outputs.joined().contains("backup test passphrase") || r.stdout.contains(marker))
    }

    func testAPatternVaultRestoresWithThePatternAlone() throws {
        let w = try BackupWorld()
        let pattern = w.write("pattern", Data("a1-b2-c3-d4-c4\n".utf8))
        let vault = w.root + "/pattern-vault"
        try w.vaultaire([
            "init", vault, "--pattern", "--passphrase-file", pattern, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", w.root + "/pattern-phrase",
        ])
        try w.vaultaire(["put", vault, pattern, "/drawn.txt", "--passphrase-file", pattern])
        try w.vaultaire(["backup", vault, w.root + "/remote", "--passphrase-file", pattern])
        let device = w.freshDevice()
        try w.vaultaire(
            ["restore", w.root + "/remote", w.root + "/restored", "--passphrase-file", pattern], device: device)
        XCTAssertEqual(
            try w.tree(of: w.root + "/restored", passphraseFile: pattern, device: device),
            ["/drawn.txt": Data("a1-b2-c3-d4-c4\n".utf8)])
    }

    func testHelpPages() throws {
        let w = try BackupWorld()
        for command in ["backup", "restore"] {
            let r = try w.vaultaire(["help", command])
            XCTAssertTrue(
                r.stdout.contains("OVERVIEW:") && r.stdout.contains("USAGE: vaultaire \(command)")
                    && r.stdout.contains("OPTIONS:"), r.stdout)
        }
    }
}
