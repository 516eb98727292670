import Foundation
import TestSupport
import XCTest

/// mount.lock while a vault is mounted: it names the daemon that holds it (issue 22, finding 1; the
/// daemon forks after opening the vault), and the commands that rewrite vault.header refuse to run
/// under a read-write mount (finding 9).
final class VaultLockTests: MountTestCase {
    func testTheBusyMessageNamesTheLiveDaemon() throws {
        try mv.mount()
        let daemon = try mv.mountProcess()
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)
        XCTAssertEqual(
            try String(contentsOfFile: mv.vault + "/mount.lock", encoding: .utf8), "\(daemon) \(boot)",
            "the daemon's PID and this boot's ID")
        let r = try mv.vaultaire(["mkdir", mv.vault, "/d", "--passphrase-file", mv.passphraseFile], expect: 19)
        XCTAssertTrue(r.stderr.contains("process \(daemon) "), r.stderr)
        XCTAssertEqual(r.errorLines.count, 1, r.stderr)
        XCTAssertEqual(kill(daemon, 0), 0, "the process named is the live daemon")
        try mv.unmount()
    }

    func testPasswdAndRecoverRefuseUnderAReadWriteMount() throws {
        let header = try Data(contentsOf: URL(fileURLWithPath: mv.vault + "/vault.header"))
        let newPassphrase = mv.root + "/new-pw"
        _ = FileManager.default.createFile(atPath: newPassphrase, contents: Data("a brand new passphrase\n".utf8))
        try mv.mount()
        let daemon = try mv.mountProcess()
        let passwd = try mv.vaultaire(
            ["passwd", mv.vault, "--passphrase-file", mv.passphraseFile, "--new-passphrase-file", newPassphrase],
            expect: 19)
        XCTAssertTrue(passwd.stderr.hasPrefix("Error: the vault is already open by process \(daemon) "), passwd.stderr)
        XCTAssertEqual(passwd.errorLines.count, 1, passwd.stderr)
        let recover = try mv.vaultaire(
            [
                "recover", mv.vault, "--recovery-phrase-file", mv.root + "/phrase",
                "--new-passphrase-file", newPassphrase,
            ], expect: 19)
        XCTAssertTrue(recover.stderr.contains("process \(daemon) "), recover.stderr)
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: mv.vault + "/vault.header")), header, "the header did not change")
        try mv.shell("echo still here > f && cat f")
        try mv.unmount()
        // A read-only mount holds no lock and never writes the header: passwd goes ahead.
        try mv.mount(["--read-only"])
        try mv.vaultaire([
            "passwd", mv.vault, "--passphrase-file", mv.passphraseFile, "--new-passphrase-file", newPassphrase,
        ])
        try mv.unmount()
        try mv.vaultaire(["ls", mv.vault, "--passphrase-file", newPassphrase])
    }
}
