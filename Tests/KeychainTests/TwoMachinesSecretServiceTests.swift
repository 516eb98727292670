import Foundation
import TestSupport
import XCTest

/// Two machines, each with its own Secret Service (issue 23): machine A uses the test session's
/// gnome-keyring-daemon; machine B gets a second D-Bus session bus with a second daemon of its own,
/// with its own keyring files. B enrols by recovery; both then open the vault with their own credential,
/// and A's remembered master key still works; `passwd` on A leaves B's slot working; A removes B's slot.
final class TwoMachinesSecretServiceTests: XCTestCase {
    var root = ""
    var busPID: pid_t = 0

    override func setUpWithError() throws {
        guard ProcessInfo.processInfo.environment["VAULTAIRE_TEST_KEYRING_PASSWORD_FILE"] != nil,
            ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil
        else {
            if ProcessInfo.processInfo.environment["VAULTAIRE_REQUIRE_FUSE"] == "1" {
                XCTFail("no test keyring: run the tests through scripts/test.sh")
            }
            throw XCTSkip("!!! no test keyring (run scripts/test.sh): Secret Service tests SKIPPED !!!")
        }
        root = "/tmp/vaultaire-two-ss-\(getpid())"
        try FileManager.default.createDirectory(atPath: root + "/b/run", withIntermediateDirectories: true)
        chmod(root + "/b/run", 0o700)
    }

    override func tearDown() {
        // The second daemon leaves with its bus.
        if busPID > 0 { kill(busPID, SIGTERM) }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Starts machine B's bus and keyring; returns B's environment.
    func startMachineB(_ base: [String: String]) throws -> [String: String] {
        var env = base
        env["HOME"] = root + "/b"
        env["XDG_DATA_HOME"] = root + "/b/data"
        env["XDG_RUNTIME_DIR"] = root + "/b/run"
        let runner = ProcessRunner(environment: env, scratch: root)
        let bus = try runner.run("/usr/bin/dbus-daemon", ["--session", "--fork", "--print-address=1", "--print-pid=1"])
        XCTAssertEqual(bus.status, 0, bus.stderr)
        let lines = bus.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, bus.stdout)
        env["DBUS_SESSION_BUS_ADDRESS"] = lines[0]
        busPID = pid_t(lines[1]) ?? 0
        XCTAssertGreaterThan(busPID, 0)
        let keyring = try ProcessRunner(environment: env, scratch: root).run(
            "/usr/bin/gnome-keyring-daemon", ["--unlock", "--components=secrets", "--daemonize"],
            input: "machine b keyring password\n")
        XCTAssertEqual(keyring.status, 0, keyring.stderr)
        usleep(300_000)
        return env
    }

    func testEnrolledByRecoveryBothMachinesOpen() throws {
        var a = ProcessInfo.processInfo.environment
        a["VAULTAIRE_KEYCHAIN"] = nil
        a["VAULTAIRE_ALLOW_WEAK_KDF"] = "1"
        let b = try startMachineB(a)
        XCTAssertNotEqual(a["DBUS_SESSION_BUS_ADDRESS"], b["DBUS_SESSION_BUS_ADDRESS"])
        let onA = ProcessRunner(environment: a, scratch: root)
        let onB = ProcessRunner(environment: b, scratch: root)
        let bin = ProcessRunner.vaultaireBinary
        _ = FileManager.default.createFile(atPath: root + "/pw-a", contents: Data("machine a passphrase\n".utf8))
        _ = FileManager.default.createFile(atPath: root + "/pw-b", contents: Data("machine b passphrase\n".utf8))
        let vault = root + "/vault"
        var r = try onA.run(
            bin,
            [
                "init", vault, "--passphrase-file", root + "/pw-a", "--kdf-iterations", "1000",
                "--recovery-iterations", "1000", "--recovery-phrase-out", root + "/phrase", "--remember",
                "--device-name", "machine-a",
            ])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try onB.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-a"])
        XCTAssertEqual(r.status, 16, "B's own Secret Service has another device salt: \(r.stderr)")
        r = try onB.run(
            bin,
            [
                "recover", vault, "--recovery-phrase-file", root + "/phrase", "--new-passphrase-file",
                root + "/pw-b", "--device-name", "machine-b",
            ])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try onB.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-b"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try onA.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-a"])
        XCTAssertEqual(r.status, 0, "A's slot is untouched: \(r.stderr)")
        r = try onA.run(bin, ["ls", vault])
        XCTAssertEqual(r.status, 0, "A's remembered key: \(r.stderr)")
        r = try onA.run(bin, ["device", "list", vault])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("* machine-a"), r.stdout)
        XCTAssertTrue(r.stdout.contains("  machine-b"), r.stdout)

        // passwd on A changes A's slot only: B keeps opening with its own credential.
        _ = FileManager.default.createFile(atPath: root + "/pw-a2", contents: Data("machine a, changed\n".utf8))
        r = try onA.run(
            bin, ["passwd", vault, "--passphrase-file", root + "/pw-a", "--new-passphrase-file", root + "/pw-a2"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try onA.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-a"])
        XCTAssertEqual(r.status, 12, "A's old passphrase no longer opens: \(r.stderr)")
        r = try onA.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-a2"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try onB.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-b"])
        XCTAssertEqual(r.status, 0, "B's slot survives A's passwd: \(r.stderr)")

        // A removes B's slot: B is then a device without a slot (exit 16); the last slot stays.
        r = try onA.run(bin, ["device", "remove", vault, "machine-b", "--passphrase-file", root + "/pw-a2"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try onB.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-b"])
        XCTAssertEqual(r.status, 16, "B has no slot now: \(r.stderr)")
        r = try onA.run(bin, ["device", "remove", vault, "machine-a", "--passphrase-file", root + "/pw-a2"])
        XCTAssertEqual(r.status, 26, "the last slot stays: \(r.stderr)")
        r = try onA.run(bin, ["ls", vault, "--passphrase-file", root + "/pw-a2"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try onA.run(bin, ["forget", vault])
        XCTAssertEqual(r.status, 0, r.stderr)
    }
}
