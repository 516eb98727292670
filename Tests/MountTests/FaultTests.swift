import Foundation
import TestSupport
import XCTest

final class FaultTests: MountTestCase {
    /// A full backing store: writes fail with ENOSPC, the index stays sound, the vault opens and
    /// verifies, and once space is freed work goes on.
    func testFullBackingStore() throws {
        let small = try mv.smallDisk(megabytes: 24, test: self)
        let vault = small + "/vault"
        try mv.vaultaire([
            "init", vault, "--passphrase-file", mv.passphraseFile, "--kdf-iterations", "1000",
            "--recovery-iterations", "1000", "--recovery-phrase-out", mv.root + "/phrase2",
        ])
        try mv.execute("/bin/dd", ["if=/dev/zero", "of=\(small)/ballast", "bs=1M", "count=4"])
        try mv.vaultaire(["mount", vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile])
        try mv.shell("echo 'kept safe' > kept.txt && sync kept.txt")
        let fill = try mv.execute(
            "/bin/bash",
            [
                "-c",
                "cd '\(mv.mountpoint)'; for i in $(seq 1 40); do dd if=/dev/urandom of=fill-$i bs=1M count=1 conv=fsync status=none || exit 7; done",
            ])
        XCTAssertEqual(fill.status, 7, "writing must stop with an error")
        XCTAssertTrue(fill.stderr.contains("No space left on device"), fill.stderr)
        try mv.shell("[ \"$(cat kept.txt)\" = 'kept safe' ]")
        // Free space outside the vault; work goes on.
        try FileManager.default.removeItem(atPath: small + "/ballast")
        try mv.shell("rm -f fill-*; echo 'after the disk was full' > later.txt && sync later.txt")
        try mv.vaultaire(["unmount", mv.mountpoint])
        try mv.vaultaire(["verify", vault, "--passphrase-file", mv.passphraseFile])
        let got = try mv.vaultaire(["get", vault, "/later.txt", "-", "--passphrase-file", mv.passphraseFile])
        XCTAssertEqual(got.stdout, "after the disk was full\n")
    }

    /// Eight threads write and read on one mount for a bounded time; then every file holds exactly
    /// what its writer last wrote, and the vault verifies.
    func testEightConcurrentWritersAndReaders() throws {
        try mv.mount()
        let root = mv.mountpoint
        let deadline = Date().addingTimeInterval(4)
        let totals = Shared((operations: 0, errors: 0, expected: [String: [UInt8]]()))
        let group = DispatchGroup()
        for worker in 0..<8 {
            group.enter()
            Thread {
                defer { group.leave() }
                var ops = 0
                var errs = 0
                var mine: [String: [UInt8]] = [:]
                var rng = SystemRandomNumberGenerator()
                while Date() < deadline {
                    let name = "\(root)/w\(worker)-\(Int.random(in: 0..<6, using: &rng))"
                    if Bool.random(using: &rng) || mine[name] == nil {
                        let data = (0..<Int.random(in: 1..<300_000, using: &rng)).map { _ in
                            UInt8.random(in: 0...255, using: &rng)
                        }
                        if FileManager.default.createFile(atPath: name, contents: Data(data)) {
                            mine[name] = data
                        } else {
                            errs += 1
                        }
                    } else if let want = mine[name] {
                        if FileManager.default.contents(atPath: name).map(Array.init) != want { errs += 1 }
                    }
                    ops += 1
                }
                totals.withLock {
                    $0.operations += ops
                    $0.errors += errs
                    $0.expected.merge(mine) { $1 }
                }
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 120), .success)
        let (operations, errors, expected) = totals.current
        print("load: 8 workers, \(operations) operations, \(errors) errors")
        XCTAssertEqual(errors, 0)
        XCTAssertGreaterThan(operations, 8)
        try mv.unmount()
        try mv.verify()
        try mv.mount()
        var corrupt = 0
        for (path, data) in expected where FileManager.default.contents(atPath: path).map(Array.init) != data {
            corrupt += 1
        }
        print("load: \(expected.count) files checked after remount, \(corrupt) corrupt")
        XCTAssertEqual(corrupt, 0)
        try mv.unmount()
    }
}
