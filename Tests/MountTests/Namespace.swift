import Foundation
import TestSupport
import XCTest

/// Runs a bash script as root in a private mount namespace (`unshare -m`), so that it can lay mounts
/// over system paths (/usr/local/bin, /dev) without touching the machine: every mount it makes, the
/// vault's FUSE mount included, exists only in there. The script starts with `set -euo pipefail`, a
/// `fail` function, the test's paths in $VAULT, $MNT, $PW, $ROOT and $VAULTAIRE, and helpers:
/// `wait_locked` waits until the daemon has persisted and released the vault after an unmount, and
/// an EXIT trap unmounts whatever is still mounted on $MNT, even when a step failed.
extension MountedVault {
    static let namespacePrelude = """
        set -euo pipefail
        fail() { echo "FAIL: $*" >&2; exit 1; }
        wait_locked() {
          for _ in $(seq 300); do [ -e "$VAULT/mount.lock" ] || return 0; sleep 0.1; done
          fail "the vault was not released after unmount"
        }
        cleanup() {
          if mountpoint -q "$MNT"; then umount "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" || umount -l "$MNT"; fi
          wait_locked 2>/dev/null || true
        }
        trap cleanup EXIT

        """

    /// Runs `script` in a new private mount namespace; returns its result (status asserted 0).
    @discardableResult
    func inPrivateNamespace(
        _ script: String, expect: Int32 = 0, file: StaticString = #filePath, line: UInt = #line
    ) throws -> ProcessRunner.Result {
        let env = ["VAULT": vault, "MNT": mountpoint, "PW": passphraseFile, "ROOT": root, "VAULTAIRE": binary]
        let r = try runner.run(
            "/usr/bin/unshare",
            ["-m", "--propagation", "private", "/bin/bash", "-c", MountedVault.namespacePrelude + script],
            extraEnvironment: env)
        XCTAssertEqual(
            r.status, expect, "script:\n\(script)\nstdout: \(r.stdout)\nstderr: \(r.stderr)", file: file, line: line)
        return r
    }

    /// Teardown for namespace tests: a daemon left behind (the script was killed) is found by its
    /// command line, its mount released from inside its namespace, and the daemon ended.
    func endStrayDaemons() {
        let fm = FileManager.default
        for pid in ((try? fm.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap({ Int32($0) }) {
            guard let raw = fm.contents(atPath: "/proc/\(pid)/cmdline") else { continue }
            let argv = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard argv.first?.hasSuffix("vaultaire") == true, argv.contains(vault) else { continue }
            _ = try? runner.run("/usr/bin/nsenter", ["-t", String(pid), "-m", "fusermount3", "-uz", mountpoint])
            kill(pid, SIGTERM)
        }
    }
}
