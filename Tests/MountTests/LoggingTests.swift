import Foundation
import TestSupport
import XCTest

/// The daemon's log (issue 26.3): syslog once in the background, standard error with -f. Each test
/// runs in a private mount namespace whose /dev is a fresh tmpfs holding the host's device nodes and a
/// /dev/log socket of the test's own, a small Python datagram listener that writes every message it
/// gets to $ROOT/syslog.txt — the same socket syslog(3) writes to on a real system.
final class LoggingTests: MountTestCase {
    static let listener = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind("/dev/log")
        open(sys.argv[2], "w").close()
        with open(sys.argv[1], "ab", buffering=0) as out:
            while True:
                out.write(s.recv(65536).rstrip(b"\\0\\n") + b"\\n")
        """

    /// A /dev of the namespace's own, with a /dev/log listener; then the test's steps.
    func withSyslogListener(_ steps: String, file: StaticString = #filePath, line: UInt = #line) throws {
        try "not the passphrase\n".write(toFile: mv.root + "/wrong", atomically: true, encoding: .utf8)
        try mv.inPrivateNamespace(
            """
            mkdir -p "$ROOT/hostdev"
            mount --rbind /dev "$ROOT/hostdev"
            mount -t tmpfs -o mode=0755 test-dev /dev
            for node in null zero full random urandom tty fuse; do
              touch "/dev/$node"
              mount --bind "$ROOT/hostdev/$node" "/dev/$node"
            done
            ln -s /proc/self/fd /dev/fd
            python3 -c '\(LoggingTests.listener)' "$ROOT/syslog.txt" "$ROOT/listening" &
            listener=$!
            trap 'cleanup; kill $listener' EXIT
            for _ in $(seq 100); do [ -e "$ROOT/listening" ] && break; sleep 0.1; done
            [ -S /dev/log ] || fail "no listener on /dev/log"
            daemon() { pgrep -f "^$VAULTAIRE mount $VAULT " || true; }
            mount_vault() { "$VAULTAIRE" mount "$VAULT" "$MNT" --passphrase-file "$PW" "$@" > /dev/null || fail "mount $*"; }
            unmount_vault() { fusermount3 -u "$MNT" || fail "unmount"; wait_locked; }

            """ + steps, file: file, line: line)
    }

    var log: [String] {
        ((try? String(contentsOfFile: mv.root + "/syslog.txt", encoding: .utf8)) ?? "").split(separator: "\n").map(
            String.init)
    }

    /// The log lines that hold `text`, each checked to be a syslog message from vaultaire naming the vault.
    func lines(containing text: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        let found = log.filter { $0.contains(text) }
        for l in found {
            XCTAssertNotNil(
                l.range(
                    of: #"^<1[1-5]>[A-Z][a-z]{2} [ 0-9]{2} [0-9:]{8} vaultaire\[[0-9]+\]: "#,
                    options: .regularExpression),
                "syslog format, facility LOG_USER: \(l)", file: file, line: line)
            XCTAssertTrue(l.contains(mv.vault), "names the vault: \(l)", file: file, line: line)
        }
        return found
    }

    func testMountUnmountIdleAuthenticationAndIOErrorsGoToSyslog() throws {
        try withSyslogListener(
            """
            if "$VAULTAIRE" mount "$VAULT" "$MNT" --passphrase-file "$ROOT/wrong" 2>/dev/null; then fail "a wrong credential mounted"; fi
            mount_vault
            head -c 100000 /dev/urandom > "$MNT/precious"
            unmount_vault
            # Damage the one blob, then read the file through the mount: EIO, and a log line.
            blob=$(find "$VAULT/blobs" -type f | head -n 1)
            python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(-100, 2); b = f.read(1); f.seek(-100, 2); f.write(bytes([b[0] ^ 0xFF]))' "$blob"
            mount_vault
            if cat "$MNT/precious" > /dev/null 2>&1; then fail "damaged data was read"; fi
            unmount_vault
            mount_vault --idle 1s
            for _ in $(seq 100); do mountpoint -q "$MNT" || break; sleep 0.1; done
            if mountpoint -q "$MNT"; then fail "the idle timeout did not unmount"; fi
            wait_locked
            """)
        XCTAssertEqual(lines(containing: "failed: wrong credential").count, 1, log.joined(separator: "\n"))
        XCTAssertEqual(lines(containing: ": mounted on \(mv.mountpoint)").count, 3, log.joined(separator: "\n"))
        XCTAssertEqual(
            lines(containing: ": unmounted from \(mv.mountpoint): saved and locked").count, 3,
            log.joined(separator: "\n"))
        XCTAssertEqual(
            lines(containing: ": idle for 1 s: unmounted \(mv.mountpoint)").count, 1, log.joined(separator: "\n"))
        let damage = lines(containing: "read: ")
        XCTAssertGreaterThan(damage.count, 0, log.joined(separator: "\n"))
        XCTAssertTrue(
            damage.allSatisfy {
                $0.hasPrefix("<11>") && $0.contains("\(mv.vault): /precious: read: ")
                    && $0.contains("fails authentication")
            }, damage.joined(separator: "\n"))
        XCTAssertTrue(lines(containing: "failed: wrong credential").allSatisfy { $0.hasPrefix("<11>") })
        XCTAssertTrue(lines(containing: ": mounted on").allSatisfy { $0.hasPrefix("<13>") })
        for l in log { XCTAssertFalse(l.contains("mount test passphrase"), "a secret in the log: \(l)") }
    }

    func testCrashRecoveryNoticesGoToSyslog() throws {
        try withSyslogListener(
            """
            mount_vault
            exec 3> "$MNT/open-while-killed"
            echo "written, never synced" >&3
            pid=$(daemon)
            [ -n "$pid" ] || fail "no daemon found"
            kill -9 $pid
            exec 3>&-
            umount -l "$MNT"
            mount_vault
            unmount_vault
            """)
        let notices =
            lines(containing: "recovered from an interrupted session") + lines(containing: "which is gone, was cleared")
        XCTAssertGreaterThan(notices.count, 0, log.joined(separator: "\n"))
        XCTAssertTrue(notices.allSatisfy { $0.hasPrefix("<12>") }, notices.joined(separator: "\n"))
    }

    /// A host I/O error: the vault on a small tmpfs fills up; the failed request is logged with the
    /// file's path and the host's reason.
    func testAFullDiskIsLogged() throws {
        try withSyslogListener(
            """
            mkdir -p "$ROOT/small"
            mount -t tmpfs -o size=8m test-small "$ROOT/small"
            cp -a "$VAULT" "$ROOT/small/vault"
            "$VAULTAIRE" mount "$ROOT/small/vault" "$MNT" --passphrase-file "$PW" > /dev/null || fail "mount"
            if head -c 20000000 /dev/zero > "$MNT/too-big" 2>/dev/null; then fail "20 MB fit in 8 MiB"; fi
            rm -f "$MNT/too-big"
            fusermount3 -u "$MNT"
            for _ in $(seq 300); do [ -e "$ROOT/small/vault/mount.lock" ] || break; sleep 0.1; done
            """)
        let full = log.filter {
            $0.contains("\(mv.root)/small/vault: /too-big: ") && $0.contains("No space left on device")
        }
        XCTAssertGreaterThan(full.count, 0, log.joined(separator: "\n"))
        XCTAssertTrue(full.allSatisfy { $0.hasPrefix("<11>") }, full.joined(separator: "\n"))
    }

    func testForegroundKeepsStandardError() throws {
        try withSyslogListener(
            """
            "$VAULTAIRE" mount "$VAULT" "$MNT" --passphrase-file "$PW" -f > /dev/null 2> "$ROOT/foreground.err" &
            foreground=$!
            for _ in $(seq 100); do mountpoint -q "$MNT" && break; sleep 0.1; done
            mountpoint -q "$MNT" || fail "not mounted in the foreground"
            fusermount3 -u "$MNT"
            wait $foreground || fail "the foreground mount exited with $?"
            """)
        let stderr = try String(contentsOfFile: mv.root + "/foreground.err", encoding: .utf8)
        XCTAssertTrue(stderr.contains("vaultaire: \(mv.vault): mounted on \(mv.mountpoint)"), stderr)
        XCTAssertTrue(
            stderr.contains("vaultaire: \(mv.vault): unmounted from \(mv.mountpoint): saved and locked"), stderr)
        XCTAssertEqual(lines(containing: "mounted on").count, 0, log.joined(separator: "\n"))
    }
}
