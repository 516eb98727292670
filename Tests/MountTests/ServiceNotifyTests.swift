import Foundation
import TestSupport
import XCTest

/// systemd readiness (issue 26.2): `vaultaire mount -f` sends READY=1 to $NOTIFY_SOCKET once the
/// folder is mounted and STOPPING=1 when it unmounts, as `Type=notify` in packaging's
/// vaultaire@.service expects. A Python datagram listener stands in for systemd (the test machine
/// runs no `systemd --user`); it writes each message it gets to a file.
final class ServiceNotifyTests: MountTestCase {
    static let listener = """
        import socket, sys
        address = sys.argv[1]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.bind("\\0" + address[1:] if address.startswith("@") else address)
        open(sys.argv[3], "w").close()
        with open(sys.argv[2], "ab", buffering=0) as out:
            while True:
                out.write(s.recv(4096) + b"\\n--\\n")
        """

    var listenerPID: pid_t?

    override func tearDown() {
        if let listenerPID {
            kill(listenerPID, SIGTERM)
            ProcessRunner.wait(listenerPID)
        }
        super.tearDown()
    }

    var messages: [String] {
        ((try? String(contentsOfFile: mv.root + "/notify.txt", encoding: .utf8)) ?? "").components(
            separatedBy: "\n--\n"
        ).filter { !$0.isEmpty }
    }

    func waitFor(_ what: String, seconds: Double = 30, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else {
                XCTFail("timed out waiting for \(what)")
                return
            }
            usleep(20_000)
        }
    }

    func startListener(at address: String) throws {
        listenerPID = try mv.spawn(
            "/usr/bin/python3",
            ["-c", ServiceNotifyTests.listener, address, mv.root + "/notify.txt", mv.root + "/listening"])
        try waitFor("the listener") { FileManager.default.fileExists(atPath: mv.root + "/listening") }
    }

    /// Mounts in the foreground with NOTIFY_SOCKET=`address`; checks READY=1 arrives with the folder
    /// mounted and the daemon's PID, and STOPPING=1 at unmount.
    func checkReadiness(address: String) throws {
        try startListener(at: address)
        let daemon = try mv.runner.spawn(
            mv.binary, ["mount", mv.vault, mv.mountpoint, "--passphrase-file", mv.passphraseFile, "-f"],
            stdout: mv.root + "/fg.out", stderr: mv.root + "/fg.err", extraEnvironment: ["NOTIFY_SOCKET": address])
        try waitFor("READY=1") { messages.contains { $0.hasPrefix("READY=1\n") } }
        XCTAssertTrue(mv.isMounted, "mounted when READY=1 arrived")
        let ready = try XCTUnwrap(messages.first)
        XCTAssertTrue(ready.contains("\nMAINPID=\(daemon)"), ready)
        XCTAssertTrue(ready.contains("\nSTATUS=Mounted \(mv.vault) on \(mv.mountpoint)"), ready)
        try mv.shell("echo ready > ready.txt")
        try mv.unmount()
        XCTAssertEqual(
            ProcessRunner.wait(daemon), 0, (try? String(contentsOfFile: mv.root + "/fg.err", encoding: .utf8)) ?? "")
        XCTAssertEqual(messages.count, 2, messages.joined(separator: "|"))
        XCTAssertTrue(messages.last?.hasPrefix("STOPPING=1\n") == true, messages.joined(separator: "|"))
    }

    func testReadyAndStoppingOnAnAbstractSocket() throws {
        try checkReadiness(address: "@vaultaire-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    }

    func testReadyAndStoppingOnAPathSocket() throws {
        try checkReadiness(address: mv.root + "/notify.sock")
    }

    func testWithoutNotifySocketNothingChanges() throws {
        try mv.mount()
        try mv.unmount()
    }

    /// The unit template is valid for systemd (with the built binary in place of /usr/bin/vaultaire,
    /// which only the package installs).
    func testUnitTemplateVerifies() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("packaging/systemd/vaultaire@.service").path
        let unit = try String(contentsOfFile: source, encoding: .utf8)
        XCTAssertTrue(unit.contains("\nType=notify\n"))
        XCTAssertTrue(unit.contains("--foreground"), "the main process must be the daemon for NotifyAccess=main")
        let dir = mv.root + "/units"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try unit.replacingOccurrences(of: "/usr/bin/vaultaire", with: mv.binary).write(
            toFile: dir + "/vaultaire@.service", atomically: true, encoding: .utf8)
        let r = try mv.execute("/usr/bin/systemd-analyze", ["verify", "--man=no", dir + "/vaultaire@test.service"])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
        XCTAssertEqual(r.stdout + r.stderr, "")
    }
}
