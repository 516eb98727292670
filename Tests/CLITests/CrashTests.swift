import Foundation
import XCTest

/// Kills a writing `vaultaire put` at random points; every time, the vault must open and verify and
/// hold every file whose `put` had finished (put fsyncs before it exits).
final class CrashTests: XCTestCase {
    func testKillDuringWritesLosesNothingCommitted() throws {
        let w = try CLIWorld()
        let pw = w.file("pw", "correct horse battery\n")
        let vault = w.root + "/vault"
        try w.run([
            "init", vault, "--passphrase-file", pw, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
            "--recovery-phrase-out", w.root + "/phrase",
        ])
        let big = w.root + "/big.bin"
        // Large enough that a kill a few milliseconds in lands mid-write.
        try FileHandle(forReadingAtPath: "/dev/urandom")!.readData(ofLength: 160 << 20).write(
            to: URL(fileURLWithPath: big))
        var committed: [String: Data] = [:]
        var killed = 0
        for trial in 0..<12 {
            // A committed file, rewritten in place sometimes, so existing files are at risk too.
            let small = Data((0..<Int.random(in: 1...70_000)).map { _ in UInt8.random(in: 0...255) })
            let smallPath = w.root + "/small-\(trial)"
            try small.write(to: URL(fileURLWithPath: smallPath))
            let target = trial % 3 == 0 ? "/kept-0" : "/kept-\(trial)"
            try w.run(["put", vault, smallPath, target, "--passphrase-file", pw])
            committed[target] = small

            let (p, _, _) = try w.start([
                "put", vault, big, trial % 2 == 0 ? "/big" : "/kept-0", "--passphrase-file", pw,
            ])
            usleep(UInt32.random(in: 2_000...150_000))
            if p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                killed += 1
            }
            p.waitUntilExit()
            if p.terminationReason == .exit && p.terminationStatus == 0 && trial % 2 != 0 {
                committed["/kept-0"] = try Data(contentsOf: URL(fileURLWithPath: big))
            } else if trial % 2 != 0 {
                committed["/kept-0"] = nil  // killed mid-rewrite: either version may survive, never garbage
            }

            let v = try w.run(["verify", vault, "--passphrase-file", pw], expect: nil)
            XCTAssertEqual(v.status, 0, "trial \(trial): verify after kill: \(v.stdout) \(v.stderr)")
            for (path, data) in committed {
                try w.run(["get", vault, path, w.root + "/out", "--force", "--passphrase-file", pw])
                XCTAssertEqual(
                    try Data(contentsOf: URL(fileURLWithPath: w.root + "/out")), data, "trial \(trial): \(path)")
            }
        }
        print("crash trials: 12, killed mid-write: \(killed), committed files lost: 0 checked by assertion")
        XCTAssertGreaterThan(killed, 3, "the kills should land while writing")
    }
}
