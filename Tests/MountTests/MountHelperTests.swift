import Foundation
import TestSupport
import XCTest

/// `mount -t fuse.vaultaire` and /etc/fstab lines (issue 26.1), through the real mount(8) and
/// mount.fuse3, which runs `vaultaire VAULT MNT -o OPTIONS` by the name in PATH. mount(8) gives its
/// helpers the default PATH, so each test runs in a private mount namespace with the built binary
/// bound into /usr/local/bin there.
final class MountHelperTests: MountTestCase {
    let onPath = """
        mkdir -p "$ROOT/bin"
        ln -sf "$VAULTAIRE" "$ROOT/bin/vaultaire"
        mount --bind "$ROOT/bin" /usr/local/bin

        """

    override func tearDown() {
        mv?.endStrayDaemons()
        super.tearDown()
    }

    func content(_ path: String) throws -> String {
        let r = try mv.vaultaire(["get", mv.vault, path, "-", "--passphrase-file", mv.passphraseFile])
        return r.stdout
    }

    func testMountTypeFuseVaultaireThenUmountLocks() throws {
        try mv.inPrivateNamespace(
            onPath + """
                mount -t fuse.vaultaire "$VAULT" "$MNT" -o "passphrase-file=$PW,keychain=file,nosuid,nodev,allow_other" || fail "mount -t fuse.vaultaire"
                [ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.vaultaire ] || fail "type: $(findmnt -n -o FSTYPE "$MNT")"
                [ "$(findmnt -n -o SOURCE "$MNT")" = "$VAULT" ] || fail "source: $(findmnt -n -o SOURCE "$MNT")"
                findmnt -n -o OPTIONS "$MNT" | grep -q nosuid || fail "nosuid passed to the kernel"
                findmnt -n -o OPTIONS "$MNT" | grep -q allow_other || fail "allow_other passed to libfuse: $(findmnt -n -o OPTIONS "$MNT")"
                echo "through mount(8)" > "$MNT/note"
                mkdir "$MNT/dir"
                [ -e "$VAULT/mount.lock" ] || fail "the daemon holds the vault"
                umount "$MNT" || fail "umount"
                wait_locked
                if mountpoint -q "$MNT"; then fail "still mounted"; fi
                """)
        XCTAssertEqual(try content("/note"), "through mount(8)\n")
        try mv.verify()
    }

    func testVaultaireOptionsInDashOForm() throws {
        try mv.inPrivateNamespace(
            onPath + """
                mount -t fuse.vaultaire "$VAULT" "$MNT" -o "ro,no-xattrs,idle=1h,extpass=cat $PW,keychain=file" || fail "mount"
                findmnt -n -o OPTIONS "$MNT" | grep -q '^ro' || fail "read-only: $(findmnt -n -o OPTIONS "$MNT")"
                if echo x 2>/dev/null > "$MNT/f"; then fail "a read-only mount took a write"; fi
                # Without xattr operations the kernel answers attribute queries with EOPNOTSUPP itself.
                python3 -c 'import errno, os, sys
                try: os.getxattr(sys.argv[1], "user.a")
                except OSError as e: sys.exit(0 if e.errno == errno.EOPNOTSUPP else 1)
                sys.exit(1)' "$MNT" || fail "no-xattrs: extended attributes still served"
                umount "$MNT"
                wait_locked
                """)
    }

    func testFstabLine() throws {
        let fstab = mv.root + "/fstab"
        try
            "# a test fstab: mount -T reads it instead of /etc/fstab\n\(mv.vault) \(mv.mountpoint) fuse.vaultaire noauto,passphrase-file=\(mv.passphraseFile),keychain=file,idle=15m 0 0\n"
            .write(toFile: fstab, atomically: true, encoding: .utf8)
        try mv.inPrivateNamespace(
            onPath + """
                mount -T "$ROOT/fstab" "$MNT" || fail "mount by the fstab line"
                [ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.vaultaire ] || fail "type"
                # mount.fuse3 adds suid and dev to a line without nosuid and nodev; the vault stays without.
                findmnt -n -o OPTIONS "$MNT" | grep -q 'nosuid,nodev' || fail "not nosuid,nodev: $(findmnt -n -o OPTIONS "$MNT")"
                echo "from fstab" > "$MNT/fstab-note"
                umount "$MNT" || fail "umount"
                wait_locked
                """)
        XCTAssertEqual(try content("/fstab-note"), "from fstab\n")
    }

    func testFstabLineWithTheRememberedKey() throws {
        try mv.mount(["--remember", "--keychain", "file"])
        try mv.unmount()
        let fstab = mv.root + "/fstab"
        try "\(mv.vault) \(mv.mountpoint) fuse.vaultaire noauto,keychain=file 0 0\n".write(
            toFile: fstab, atomically: true, encoding: .utf8)
        // No credential anywhere and no terminal: only the remembered key can open it.
        try mv.inPrivateNamespace(
            onPath + """
                mount -T "$ROOT/fstab" "$MNT" < /dev/null || fail "mount with the remembered key"
                echo remembered > "$MNT/r"
                umount "$MNT"
                wait_locked
                """)
        XCTAssertEqual(try content("/r"), "remembered\n")
    }

    func testHelperFormErrors() throws {
        // Called directly, as mount.fuse3 would: a vaultaire option without its value, a reserved one.
        let noValue = try mv.vaultaire([mv.vault, mv.mountpoint, "-o", "idle"], expect: 64)
        XCTAssertTrue(noValue.stderr.hasPrefix("Error: -o idle needs a value: idle=<duration>"), noValue.stderr)
        let reserved = try mv.vaultaire(
            [mv.vault, mv.mountpoint, "-o", "subtype=x,passphrase-file=\(mv.passphraseFile)"], expect: 64)
        XCTAssertTrue(reserved.stderr.hasPrefix("Error: -o subtype is set by vaultaire"), reserved.stderr)
        let bogus = try mv.vaultaire(
            [mv.vault, mv.mountpoint, "-o", "no_such_fuse_option,passphrase-file=\(mv.passphraseFile)"], expect: 21)
        XCTAssertTrue(bogus.stderr.contains("Error: libfuse rejected the mount options"), bogus.stderr)
        XCTAssertFalse(mv.isMounted)
        let unknown = try mv.vaultaire([mv.root + "/nonexistent", mv.mountpoint], expect: 64)
        XCTAssertTrue(unknown.stderr.hasPrefix("Error: unknown command"), unknown.stderr)
    }

    func testMountCommandTakesTheSameDashOOptions() throws {
        try mv.vaultaire(["mount", mv.vault, mv.mountpoint, "-o", "passphrase-file=\(mv.passphraseFile),ro"])
        XCTAssertTrue(mv.isMounted)
        let status = try mv.vaultaire(["status"])
        XCTAssertTrue(status.stdout.contains("(read-only)"), status.stdout)
        try mv.unmount()
    }
}
