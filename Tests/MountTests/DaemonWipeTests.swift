import Foundation
import TestSupport
import XCTest

/// The real mount daemon keeps no key after it locks (issue 22, finding 5). With
/// VAULTAIRE_TEST_MEMORY_SCAN the daemon scans its own memory for the vault's keys just before and
/// just after locking and writes the counts to a report. A program holds a file open through the
/// mount when the daemon is told to stop (SIGTERM): the kernel still holds that handle, so its
/// file's content key lives on in the daemon past the lock unless the lock wipes it.
final class DaemonWipeTests: MountTestCase {
    func testTheDaemonHoldsNoKeyAfterLockEvenWithAFileStillOpen() throws {
        let report = mv.root + "/memory-scan"
        mv.runner.environment["VAULTAIRE_TEST_MEMORY_SCAN"] = report
        try mv.mount()
        try mv.shell("echo 'kept open at lock' > held && echo 'closed before' > closed && sync")
        let holder = try mv.spawn("/bin/bash", ["-c", "exec 3<>'\(mv.mountpoint)/held'; echo more >&3; sleep 60"])
        defer {
            kill(holder, SIGKILL)
            ProcessRunner.wait(holder)
        }
        usleep(300_000)
        let daemon = try mv.mountProcess()
        kill(daemon, SIGTERM)
        XCTAssertTrue(waitUntil(seconds: 15) { kill(daemon, 0) != 0 }, "the daemon ends after SIGTERM")
        let text = try String(contentsOfFile: report, encoding: .utf8)
        let lines = text.split(separator: "\n")
        print("daemon memory scan:\n\(text)")
        XCTAssertEqual(
            lines.filter { $0.hasPrefix("content key of open file") }.count, 1,
            "the held file's key was scanned: \(text)")
        // The master key is not among them: the mount command wipes it once the derived keys exist.
        for label in ["index key", "file-header key", "thumbnail key"] {
            XCTAssertEqual(lines.filter { $0.hasPrefix(label + ":") }.count, 1, "\(label) scanned: \(text)")
        }
        for line in lines {
            // "<label>: before N, after M": found while unlocked (the scan works), gone after.
            let counts = line.split(separator: ":").last!.split(separator: ",").map {
                Int($0.split(separator: " ").last!)!
            }
            XCTAssertGreaterThan(counts[0], 0, "positive control: \(line)")
            XCTAssertEqual(counts[1], 0, "still in the daemon's memory after lock: \(line)")
        }
    }
}
