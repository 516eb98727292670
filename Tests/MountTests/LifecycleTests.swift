import Foundation
import TestSupport
import XCTest

final class LifecycleTests: MountTestCase {
    func testRefusalsLeaveNothingMounted() throws {
        FileManager.default.createFile(atPath: mv.root + "/wrong", contents: Data("not the passphrase".utf8))
        let wrong = try mv.vaultaire(
            ["mount", mv.vault, mv.mountpoint, "--passphrase-file", mv.root + "/wrong"], expect: 12)
        XCTAssertTrue(wrong.stderr.hasPrefix("Error: wrong credential"))
        XCTAssertFalse(mv.isMounted)
        FileManager.default.createFile(atPath: mv.mountpoint + "/stray", contents: Data())
        let busy = try mv.vaultaire(
            ["mount", mv.vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile], expect: 21)
        XCTAssertTrue(busy.stderr.contains("not empty"))
        try FileManager.default.removeItem(atPath: mv.mountpoint + "/stray")
        try mv.mount()
        try FileManager.default.createDirectory(atPath: mv.root + "/mnt2", withIntermediateDirectories: true)
        let twice = try mv.vaultaire(
            ["mount", mv.vault, mv.root + "/mnt2", "--passphrase-file", mv.passphraseFile], expect: 19)
        XCTAssertTrue(twice.stderr.contains("already open"))
        let status = try mv.vaultaire(["status"])
        XCTAssertTrue(status.stdout.contains(mv.vault))
        XCTAssertTrue(status.stdout.contains("\(mv.vault) on \(mv.mountpoint)"))
        try mv.unmount()
        // Other mounts of the machine may be listed (tests running beside this one); not this vault.
        XCTAssertFalse(try mv.vaultaire(["status"]).stdout.contains(mv.vault))
        // An unknown format version is refused before anything is asked or mounted.
        var header = try Data(contentsOf: URL(fileURLWithPath: mv.vault + "/vault.header"))
        header[4] = 3
        try header.write(to: URL(fileURLWithPath: mv.vault + "/vault.header"))
        let unknown = try mv.vaultaire(
            ["mount", mv.vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile], expect: 14)
        XCTAssertTrue(unknown.stderr.contains("unsupported vault format version 3"))
        XCTAssertFalse(mv.isMounted)
    }

    func testSignalsAndIdleTimeoutUnmountAndLock() throws {
        // SIGTERM to the mount process: unmounted, persisted, lock released.
        try mv.mount()
        try mv.shell("echo 'written before SIGTERM' > note")
        let pid = try mv.execute(
            "/bin/bash", ["-c", "fuser -m '\(mv.mountpoint)' 2>/dev/null; pgrep -f 'vaultaire mount \(mv.vault) '"]
        ).stdout
            .split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Int32($0) }.last
        let daemon = try XCTUnwrap(pid, "the mount process")
        kill(daemon, SIGTERM)
        XCTAssertTrue(waitUntil(seconds: 10) { !self.mv.isMounted && kill(daemon, 0) != 0 }, "SIGTERM unmounts")
        try mv.verify()
        let got = try mv.vaultaire(["get", mv.vault, "/note", "-", "--passphrase-file", mv.passphraseFile])
        XCTAssertEqual(got.stdout, "written before SIGTERM\n")

        // Idle timeout: unmounts by itself after a quiet spell.
        try mv.mount(["--idle", "2s"])
        XCTAssertTrue(waitUntil(seconds: 15) { !self.mv.isMounted }, "idle timeout unmounts")
        XCTAssertTrue(waitUntil(seconds: 10) { self.lockIsFree() })
        try mv.verify()
    }

    /// Without extended attributes the mount refuses them (EOPNOTSUPP) and everything else works; the
    /// attributes stored earlier are kept in the vault and come back with the next ordinary mount.
    func testMountWithoutExtendedAttributes() throws {
        try mv.mount()
        try mv.shell("echo data > f && python3 -c \"import os; os.setxattr('f', 'user.tag', b'kept')\"")
        try mv.unmount()
        try mv.mount(["--no-xattrs"])
        try mv.shell(
            """
            python3 -c "
            import errno, os
            for call in (lambda: os.getxattr('f', 'user.tag'), lambda: os.setxattr('f', 'user.x', b'1'), lambda: os.listxattr('f')):
                try: call(); raise SystemExit('extended attributes answered')
                except OSError as e: assert e.errno == errno.EOPNOTSUPP, e
            "
            echo more >> f
            cp f g
            cmp f g
            [ "$(cat g)" = "$(printf 'data\nmore')" ]
            """)
        try mv.unmount()
        try mv.mount()
        try mv.shell("python3 -c \"import os; assert os.getxattr('f', 'user.tag') == b'kept'\"")
        try mv.unmount()
    }

    func testReadOnlyMount() throws {
        try mv.mount()
        try mv.shell("echo kept > kept.txt")
        try mv.unmount()
        try mv.mount(["--read-only"])
        let r = try mv.execute(
            "/bin/bash", ["-c", "cat '\(mv.mountpoint)/kept.txt' && ! touch '\(mv.mountpoint)/new' 2>/dev/null"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "kept\n")
        try mv.unmount()
    }

    func testSIGKILLDuringWritesKeepsEverythingFsynced() throws {
        var rng = SystemRandomNumberGenerator()
        for trial in 0..<4 {
            try mv.mount()
            // Files written and fsynced, then more writes racing the kill.
            try mv.shell(
                """
                mkdir -p d; python3 -c "
                import os
                for i in range(5):
                    with open('d/sync-\(trial)-%d' % i, 'wb') as f:
                        f.write(bytes([\(trial) + i]) * (70000 + i)); f.flush(); os.fsync(f.fileno())
                "
                """)
            let writer = try mv.spawn(
                "/bin/bash",
                [
                    "-c",
                    "cd '\(mv.mountpoint)' && while true; do head -c 200000 /dev/urandom > d/busy-$RANDOM || exit 0; done",
                ])
            usleep(UInt32.random(in: 50_000...300_000, using: &rng))
            _ = try mv.execute("/usr/bin/pkill", ["-KILL", "-f", "vaultaire mount \(mv.vault) "])
            kill(writer, SIGKILL)
            ProcessRunner.wait(writer)
            _ = try mv.execute("/bin/fusermount3", ["-uz", mv.mountpoint])
            XCTAssertTrue(waitUntil(seconds: 5) { !self.mv.isMounted })
            try mv.mount()
            try mv.shell(
                """
                for t in $(seq 0 \(trial)); do for i in 0 1 2 3 4; do
                  python3 -c "import sys; d=open('d/sync-%s-%s' % (sys.argv[1], sys.argv[2]),'rb').read(); assert d == bytes([int(sys.argv[1])+int(sys.argv[2])])*(70000+int(sys.argv[2]))" $t $i
                done; done
                """)
            try mv.unmount()
            try mv.verify()
        }
    }

    func lockIsFree() -> Bool {
        let fd = open(mv.vault + "/mount.lock", O_RDONLY)
        if fd < 0 { return true }
        defer { close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) == 0
    }
}

func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(50_000)
    }
    return condition()
}
