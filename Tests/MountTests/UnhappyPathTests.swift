import Foundation
import TestSupport
import XCTest

/// The unhappy paths of a mounted vault, each as a user meets it: a full disk, a save that fails at
/// unmount, the idle timeout with files open, an editor's save interrupted by kill -9, `unmount .`
/// from inside the mount, and chown of a set-ID file. Each step is one assertion.
final class UnhappyPathTests: MountTestCase {
    private func makeVault(in directory: String) throws -> String {
        let vault = directory + "/vault"
        try mv.vaultaire([
            "init", vault, "--passphrase-file", mv.passphraseFile, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", mv.root + "/phrase-small",
        ])
        return vault
    }

    /// Issue scenario: a vault on a 24 MiB tmpfs; a 40 MiB file fails with ENOSPC; once it is removed,
    /// a small file written at once reads back, and the vault verifies after unmount.
    func testDiskFullThenSpaceFreed() throws {
        let vault = try makeVault(in: try mv.smallDisk(megabytes: 24, test: self))
        try mv.vaultaire(["mount", vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile])
        let big = try mv.execute("/bin/bash", ["-c", "head -c 40M /dev/urandom > '\(mv.mountpoint)/big'"])
        XCTAssertNotEqual(big.status, 0, "a 40 MiB file cannot fit on 24 MiB")
        XCTAssertTrue(big.stderr.contains("No space left on device"), big.stderr)
        try mv.shell("rm -f big")
        try mv.shell("echo ok > after")
        let cat = try mv.execute("/bin/cat", [mv.mountpoint + "/after"])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        XCTAssertEqual(cat.stdout, "ok\n")
        try mv.vaultaire(["unmount", mv.mountpoint])
        let verify = try mv.vaultaire(["verify", vault, "--passphrase-file", mv.passphraseFile])
        XCTAssertFalse(verify.stdout.contains("DAMAGED"), verify.stdout)
        let got = try mv.vaultaire(["get", vault, "/after", "-", "--passphrase-file", mv.passphraseFile])
        XCTAssertEqual(got.stdout, "ok\n")
    }

    /// A save that fails while the vault is being locked (the disk filled up from outside) is reported
    /// by `vaultaire unmount` with a non-zero exit and one line — and the vault still opens and
    /// verifies once space is back.
    func testUnmountReportsAFailedSave() throws {
        let small = try mv.smallDisk(megabytes: 24, test: self)
        let vault = try makeVault(in: small)
        try mv.vaultaire(["mount", vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile])
        try mv.shell("echo 'written before the disk filled' > note.txt")
        // Files written since mounting: locking journals each one's final record, more than fits in
        // what is left of the journal's last page.
        try mv.shell("for i in $(seq 1 300); do echo \"file $i\" > f$i || exit 1; done")
        // Fill every free block of the tmpfs from outside the vault.
        let fill = try mv.execute("/bin/dd", ["if=/dev/zero", "of=\(small)/ballast", "bs=64k", "status=none"])
        XCTAssertNotEqual(fill.status, 0, "dd stops when the disk is full")
        let unmount = try mv.vaultaire(["unmount", mv.mountpoint], expect: nil)
        XCTAssertNotEqual(unmount.status, 0, "unmount must not claim success: \(unmount.stdout)")
        XCTAssertFalse(unmount.stdout.contains("locked"), unmount.stdout)
        XCTAssertTrue(unmount.stderr.hasPrefix("Error: "), unmount.stderr)
        XCTAssertEqual(unmount.stderr.split(separator: "\n").count, 1, unmount.stderr)
        XCTAssertFalse(mv.isMounted)
        try FileManager.default.removeItem(atPath: small + "/ballast")
        try mv.vaultaire(["verify", vault, "--passphrase-file", mv.passphraseFile])
        let got = try mv.vaultaire(["get", vault, "/note.txt", "-", "--passphrase-file", mv.passphraseFile])
        XCTAssertEqual(got.stdout, "written before the disk filled\n")
        let last = try mv.vaultaire(["get", vault, "/f300", "-", "--passphrase-file", mv.passphraseFile])
        XCTAssertEqual(last.stdout, "file 300\n")
    }

    /// `--idle 1s` with a program holding a file open for writing: the vault stays mounted while the
    /// file is open, every write reaches the vault, and the idle unmount comes after the close.
    func testIdleWaitsForOpenFiles() throws {
        try mv.mount(["--idle", "1s"])
        let script = """
            exec 3> held.txt
            echo 'before the idle window' >&3
            sleep 4
            echo 'after the idle window' >&3
            exec 3>&-
            """
        try mv.shell(script)
        XCTAssertTrue(mv.isMounted, "still mounted right after the close")
        var waited = 0
        while mv.isMounted && waited < 100 {
            usleep(100_000)
            waited += 1
        }
        XCTAssertFalse(mv.isMounted, "idle unmount once nothing is open")
        try mv.verify()
        let got = try mv.vaultaire(["get", mv.vault, "/held.txt", "-", "--passphrase-file", mv.passphraseFile])
        XCTAssertEqual(got.stdout, "before the idle window\nafter the idle window\n")
    }

    /// The editor's way of saving (write a temporary file, fsync it, rename it over the original),
    /// in a loop, with the mount daemon killed by SIGKILL at a random moment; after remounting the
    /// file always exists whole, with one of the versions written.
    func testEditorSavesSurviveKill9() throws {
        let rounds = 12
        var versions = Set<String>()
        for round in 0..<rounds {
            try mv.mount()
            if round == 0 { try mv.shell("printf 'version start\\n%.0s' {1..500} > doc.txt") }
            let saver = try mv.spawn(
                "/bin/bash",
                [
                    "-c",
                    """
                    cd '\(mv.mountpoint)' || exit 1
                    for i in $(seq 1 100000); do
                      printf "version \(round)-$i\\n%.0s" {1..500} > .doc.txt.swp || exit 0
                      sync .doc.txt.swp || exit 0
                      mv -f .doc.txt.swp doc.txt || exit 0
                    done
                    """,
                ])
            usleep(UInt32.random(in: 200_000...900_000))
            let daemon = try mv.mountProcess()
            kill(daemon, SIGKILL)
            ProcessRunner.wait(saver)
            _ = try mv.execute("/bin/fusermount3", ["-uz", mv.mountpoint])
            var waited = 0
            while kill(daemon, 0) == 0 && waited < 50 {
                usleep(100_000)
                waited += 1
            }
            try mv.mount()
            let content = try mv.execute("/bin/cat", [mv.mountpoint + "/doc.txt"])
            XCTAssertEqual(content.status, 0, "round \(round): doc.txt must exist: \(content.stderr)")
            let lines = content.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            XCTAssertEqual(lines.count, 500, "round \(round): the file is whole")
            XCTAssertEqual(Set(lines).count, 1, "round \(round): one version, not a mix")
            if let first = lines.first { versions.insert(String(first)) }
            try mv.unmount()
            try mv.verify()
        }
        XCTAssertGreaterThan(versions.count, 1, "the saves made progress between kills")
    }

    /// A damaged `vault.header` (one flipped bit in the recovery envelope) through a real mount: a
    /// read-write mount is refused with exit 13 naming the header and nothing is mounted; a read-only
    /// mount serves every file, warns, and refuses writes.
    func testADamagedHeaderMountsReadOnlyOnly() throws {
        try mv.mount()
        try mv.shell("printf 'kept through the damage\\n' > kept.txt")
        try mv.unmount()
        let headerPath = mv.vault + "/vault.header"
        var header = [UInt8](try Data(contentsOf: URL(fileURLWithPath: headerPath)))
        header[100] ^= 0x01
        try Data(header).write(to: URL(fileURLWithPath: headerPath))

        let refused = try mv.vaultaire(
            ["mount", mv.vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile], expect: 13)
        XCTAssertTrue(refused.stderr.contains("vault.header"), refused.stderr)
        XCTAssertFalse(mv.isMounted)

        let readOnly = try mv.vaultaire(
            ["mount", mv.vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile, "--read-only"])
        XCTAssertTrue(readOnly.stderr.contains("vault.header fails its checksum or MAC"), readOnly.stderr)
        XCTAssertTrue(mv.isMounted)
        let read = try mv.shell("cat kept.txt")
        XCTAssertEqual(read.stdout, "kept through the damage\n")
        let write = try mv.execute("/bin/sh", ["-c", "echo more >> '\(mv.mountpoint)/kept.txt'"])
        XCTAssertNotEqual(write.status, 0, "a write through a read-only mount")
        XCTAssertTrue(write.stderr.contains("Read-only file system"), write.stderr)
        try mv.unmount()
        XCTAssertEqual(
            [UInt8](try Data(contentsOf: URL(fileURLWithPath: headerPath))), header, "the header is left as found")
    }

    /// `vaultaire unmount .` from a shell whose working directory is the mount.
    func testUnmountFromInsideTheMount() throws {
        try mv.mount()
        let r = try mv.execute("/bin/bash", ["-c", "cd '\(mv.mountpoint)' || exit 9; exec '\(mv.binary)' unmount ."])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertFalse(mv.isMounted)
    }

    /// chown of a set-ID file by its (non-root) owner clears set-user-ID, and set-group-ID when the
    /// group may execute, as ext4 does.
    func testChownByOwnerClearsSetIDBits() throws {
        try mv.mount(["-o", "allow_other"])
        try mv.shell("touch suid && chown 1000:1000 suid && chmod 06555 suid")
        try mv.shell("touch sgid-noexec && chown 1000:1000 sgid-noexec && chmod 02644 sgid-noexec")
        let asOwner = ["--reuid=1000", "--regid=1000", "--clear-groups"]
        let chown1 = try mv.execute("/usr/bin/setpriv", asOwner + ["chown", "1000:1000", mv.mountpoint + "/suid"])
        XCTAssertEqual(chown1.status, 0, chown1.stderr)
        let chown2 = try mv.execute(
            "/usr/bin/setpriv", asOwner + ["chown", "1000:1000", mv.mountpoint + "/sgid-noexec"])
        XCTAssertEqual(chown2.status, 0, chown2.stderr)
        let modes = try mv.execute(
            "/usr/bin/stat", ["-c", "%a", mv.mountpoint + "/suid", mv.mountpoint + "/sgid-noexec"])
        XCTAssertEqual(modes.stdout.split(separator: "\n"), ["555", "2644"])
        try mv.unmount()
        try mv.mount()
        let persisted = try mv.execute("/usr/bin/stat", ["-c", "%a", mv.mountpoint + "/suid"])
        XCTAssertEqual(persisted.stdout, "555\n")
        try mv.unmount()
    }
}
