import Foundation
import XCTest

/// A vault used on two machines (issue 23): each has its own keychain — here two file keychains in two
/// XDG_DATA_HOMEs — and, after one enrolment by recovery, its own slot in `vault.header`.
final class DeviceSlotTests: XCTestCase {
    /// Machine B's environment: its own keychain.
    func machineB(_ w: CLIWorld) -> [String: String] { ["XDG_DATA_HOME": w.root + "/data-b"] }

    /// A new vault made on machine A: its path, A's passphrase file and the recovery phrase's file.
    func newVault(_ w: CLIWorld, deviceName: String? = nil) throws -> (vault: String, pwA: String, phrase: String) {
        let pwA = w.file("pw", "correct horse battery\n")
        let vault = w.root + "/vault"
        let phrase = w.root + "/phrase.txt"
        try w.run(
            [
                "init", vault, "--passphrase-file", pwA, "--kdf-iterations", "1000", "--recovery-iterations", "1000",
                "--recovery-phrase-out", phrase,
            ] + (deviceName.map { ["--device-name", $0] } ?? []))
        return (vault, pwA, phrase)
    }

    func testTwoMachinesEachWithASlot() throws {
        let w = try CLIWorld()
        let (vault, pwA, phrase) = try newVault(w, deviceName: "laptop")
        try w.run(["put", vault, pwA, "/from-a.txt", "--passphrase-file", pwA])
        let b = machineB(w)
        let pwB = w.file("pw-b", "the desktop's own passphrase\n")
        let unknown = try w.run(["ls", vault, "--passphrase-file", pwA], environment: b, expect: 16)
        XCTAssertTrue(unknown.stderr.contains("vaultaire recover"), unknown.stderr)
        let enrolled = try w.run(
            [
                "recover", vault, "--recovery-phrase-file", phrase, "--new-passphrase-file", pwB, "--device-name",
                "desktop",
            ], environment: b)
        XCTAssertTrue(enrolled.stdout.contains("enrolled"), enrolled.stdout)
        // Both open, each with its own credential, with no recovery on A.
        let onA = try w.run(["ls", vault, "/", "--passphrase-file", pwA])
        XCTAssertTrue(onA.stdout.contains("from-a.txt"), onA.stdout)
        let onB = try w.run(["ls", vault, "/", "--passphrase-file", pwB], environment: b)
        XCTAssertTrue(onB.stdout.contains("from-a.txt"), onB.stdout)
        try w.run(["ls", vault, "--passphrase-file", pwB], expect: 12)  // B's credential is not A's
        let list = try w.run(["device", "list", vault])
        let rows = list.stdout.split(separator: "\n").dropFirst()
        XCTAssertEqual(rows.count, 2, list.stdout)
        XCTAssertTrue(rows[rows.startIndex].hasPrefix("* laptop"), list.stdout)  // this machine is marked
        XCTAssertTrue(rows[rows.startIndex + 1].hasPrefix("  desktop"), list.stdout)
        XCTAssertTrue(list.stdout.contains("passphrase"), list.stdout)
        XCTAssertTrue(list.stdout.contains("1000"), list.stdout)

        // passwd on A changes A's slot only, and says so.
        let newA = w.file("pw-a2", "laptop passphrase, changed\n")
        let passwd = try w.run(["passwd", vault, "--passphrase-file", pwA, "--new-passphrase-file", newA])
        XCTAssertTrue(passwd.stdout.contains("other device slot"), passwd.stdout)
        try w.run(["ls", vault, "--passphrase-file", pwA], expect: 12)
        try w.run(["ls", vault, "--passphrase-file", newA])
        try w.run(["ls", vault, "--passphrase-file", pwB], environment: b)

        // A removes B's slot (by name); B is then a device without a slot. The last slot stays.
        let removed = try w.run(["device", "remove", vault, "desktop", "--passphrase-file", newA])
        XCTAssertTrue(removed.stdout.contains("desktop"), removed.stdout)
        try w.run(["ls", vault, "--passphrase-file", pwB], environment: b, expect: 16)
        try w.run(["device", "remove", vault, "nobody", "--passphrase-file", newA], expect: 17)
        let last = try w.run(["device", "remove", vault, "laptop", "--passphrase-file", newA], expect: 26)
        XCTAssertTrue(last.stderr.contains("only device slot"), last.stderr)
        try w.run(["verify", vault, "--passphrase-file", newA])
        XCTAssertEqual(try w.run(["device", "list", vault]).stdout.split(separator: "\n").count, 2)
    }

    /// A slot made without --device-name is named after the host and dated today; a slot is removed
    /// by its salt ID as well as by its name.
    func testSlotsAreNamedDatedAndRemovableBySaltID() throws {
        let w = try CLIWorld()
        let (vault, pwA, phrase) = try newVault(w)
        let b = machineB(w)
        let pwB = w.file("pw-b", "the desktop's own passphrase\n")
        try w.run(
            [
                "recover", vault, "--recovery-phrase-file", phrase, "--new-passphrase-file", pwB, "--device-name",
                "desktop",
            ],
            environment: b)
        let rows = try w.run(["device", "list", vault]).stdout.split(separator: "\n").dropFirst().map {
            $0.split(separator: " ").map(String.init)
        }
        XCTAssertEqual(rows.count, 2)
        var name = [CChar](repeating: 0, count: 256)
        XCTAssertEqual(gethostname(&name, name.count), 0)
        let host = String(cString: name)
        XCTAssertEqual(rows.first?.dropFirst().first, host, "\(rows)")  // after the "*" of this machine
        let today = ISO8601DateFormatter.string(
            from: Date(), timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withFullDate])
        XCTAssertTrue(rows.allSatisfy { $0.contains(today) }, "\(rows)")
        let desktop = try XCTUnwrap(rows.first { $0.first == "desktop" })
        let saltID = desktop[1]
        XCTAssertEqual(saltID.count, 16, "\(desktop)")
        let removed = try w.run(["device", "remove", vault, saltID, "--passphrase-file", pwA])
        XCTAssertTrue(removed.stdout.contains("desktop"), removed.stdout)
        try w.run(["ls", vault, "--passphrase-file", pwB], environment: b, expect: 16)
        XCTAssertEqual(try w.run(["device", "list", vault]).stdout.split(separator: "\n").count, 2)
    }

    /// The way a sync folder is used: one machine at a time, the directory copied over between uses.
    /// After B's one enrolment neither machine needs `recover` again.
    func testOneMachineAtATimeThroughCopies() throws {
        let w = try CLIWorld()
        let (vaultA, pwA, phrase) = try w.makeVault()
        let b = machineB(w)
        let vaultB = w.root + "/vault-on-b"
        let pwB = w.file("pw-b", "the desktop's own passphrase\n")
        func sync(_ from: String, _ to: String) throws {
            try? FileManager.default.removeItem(atPath: to)
            let cp = Process()
            cp.executableURL = URL(fileURLWithPath: "/bin/cp")
            cp.arguments = ["-a", from, to]
            try cp.run()
            cp.waitUntilExit()
            XCTAssertEqual(cp.terminationStatus, 0)
        }
        try sync(vaultA, vaultB)
        try w.run(
            ["recover", vaultB, "--recovery-phrase-file", phrase, "--new-passphrase-file", pwB], environment: b)
        for round in 0..<3 {
            let onB = w.file("b-\(round)", "written on B, round \(round)\n")
            try w.run(["put", vaultB, onB, "/b-\(round).txt", "--passphrase-file", pwB], environment: b)
            try sync(vaultB, vaultA)
            let got = try w.run(["get", vaultA, "/b-\(round).txt", "-", "--passphrase-file", pwA])
            XCTAssertEqual(got.stdout, "written on B, round \(round)\n")
            let onA = w.file("a-\(round)", "written on A, round \(round)\n")
            try w.run(["put", vaultA, onA, "/a-\(round).txt", "--passphrase-file", pwA])
            try sync(vaultA, vaultB)
            let back = try w.run(["get", vaultB, "/a-\(round).txt", "-", "--passphrase-file", pwB], environment: b)
            XCTAssertEqual(back.stdout, "written on A, round \(round)\n")
        }
        try w.run(["verify", vaultA, "--passphrase-file", pwA])
        try w.run(["verify", vaultB, "--passphrase-file", pwB], environment: b)
    }

    /// A flipped bit anywhere in `vault.header` — prefix, recovery envelope, slot count, a slot's
    /// parameters, date, name or envelope, the MAC, the checksum — is reported as a damaged header by
    /// `verify` with the credential alone (exit 13), never as a wrong credential and never "all intact".
    func testABitFlipInEachHeaderRegionIsFoundByVerify() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        let headerPath = vault + "/vault.header"
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: headerPath)))
        let nameLength = Int(original[144]) | Int(original[145]) << 8
        let slotEnvelope = 146 + nameLength
        let regions: [(String, Int)] = [
            ("vault ID", 10), ("chunk size", 22), ("recovery count", 24), ("recovery salt", 40),
            ("recovery nonce", 64), ("recovery envelope", 100), ("slot count", 120), ("credential kind", 121),
            ("slot count of iterations", 124), ("salt ID", 130), ("date added", 140), ("name", 146),
            ("slot nonce", slotEnvelope + 2), ("slot envelope", slotEnvelope + 30), ("MAC", original.count - 50),
            ("checksum", original.count - 5),
        ]
        for (region, offset) in regions {
            var b = original
            b[offset] ^= 0x01
            try Data(b).write(to: URL(fileURLWithPath: headerPath))
            let r = try w.run(["verify", vault, "--passphrase-file", pw], expect: 13)
            let said = r.stdout + r.stderr
            XCTAssertTrue(said.contains("vault.header") || said.contains("vault header"), "\(region): \(said)")
            XCTAssertFalse(said.contains("all intact"), region)
            XCTAssertFalse(said.contains("wrong credential"), region)
        }
        try Data(original).write(to: URL(fileURLWithPath: headerPath))
        try w.run(["verify", vault, "--passphrase-file", pw])
    }

    /// A damaged header outside this device's slot: reading still works with a warning and writing is
    /// refused.
    func testADamagedHeaderIsReadableAndRefusesWrites() throws {
        let w = try CLIWorld()
        let (vault, pw, phrase) = try w.makeVault()
        try w.run(["put", vault, pw, "/kept.txt", "--passphrase-file", pw])
        let headerPath = vault + "/vault.header"
        var header = [UInt8](try Data(contentsOf: URL(fileURLWithPath: headerPath)))
        header[100] ^= 0x01  // inside the recovery envelope
        try Data(header).write(to: URL(fileURLWithPath: headerPath))
        let read = try w.run(["get", vault, "/kept.txt", "-", "--passphrase-file", pw])
        XCTAssertEqual(read.stdout, "correct horse battery\n")
        XCTAssertTrue(read.stderr.contains("vault.header fails its checksum or MAC"), read.stderr)
        let write = try w.run(["mkdir", vault, "/new", "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(write.stderr.contains("verify --repair"), write.stderr)
        let verify = try w.run(["verify", vault, "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(verify.stdout.contains("DAMAGED vault.header"), verify.stdout)
        // The repair without the phrase is refused (HeaderDamageTests has the rest).
        try w.run(["verify", vault, "--repair", "--passphrase-file", pw], expect: 13)
        try w.run(["verify", vault, "--passphrase-file", pw, "--recovery-phrase-file", phrase], expect: 13)
    }
}
