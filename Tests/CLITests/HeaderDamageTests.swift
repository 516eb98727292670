import Foundation
import XCTest

/// A damaged or altered `vault.header` (issue 23): told from a wrong credential wherever something
/// shows the credential was right, and never repaired into a header whose MAC vouches for a recovery
/// envelope nobody has checked.
final class HeaderDamageTests: XCTestCase {
    /// Machine B's environment: its own keychain.
    func machineB(_ w: CLIWorld) -> [String: String] { ["XDG_DATA_HOME": w.root + "/data-b"] }

    func readHeader(_ vault: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: vault + "/vault.header")))
    }

    func writeHeader(_ bytes: [UInt8], _ vault: String) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: vault + "/vault.header"))
    }

    /// `bytes` with its last 32 bytes replaced by the SHA-256 of the rest, as someone altering the
    /// header on purpose would leave it (computed by coreutils' sha256sum, not by the code under test).
    func withChecksumRecomputed(_ bytes: [UInt8], _ w: CLIWorld) throws -> [UInt8] {
        let body = Array(bytes.dropLast(32))
        let path = w.root + "/header-body"
        try Data(body).write(to: URL(fileURLWithPath: path))
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        p.arguments = [path]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        let hex = Array(text.prefix(64))
        let digest = stride(from: 0, to: 64, by: 2).map { UInt8(String(hex[$0...$0 + 1]), radix: 16)! }
        return body + digest
    }

    /// The offsets of one slot's fields, from the slot's first byte (docs/FORMAT.md, "Version 2").
    struct SlotRegions {
        let start: Int
        let nameLength: Int
        var end: Int { start + 85 + nameLength }
        func all(_ who: String) -> [(String, Int)] {
            [
                ("\(who) credential kind", start), ("\(who) pattern rows", start + 1),
                ("\(who) KDF count", start + 3), ("\(who) salt ID", start + 7), ("\(who) date added", start + 15),
                ("\(who) name", start + 25), ("\(who) nonce", start + 25 + nameLength),
                ("\(who) envelope", start + 25 + nameLength + 22),
            ]
        }
    }

    func slots(_ header: [UInt8]) -> [SlotRegions] {
        var result: [SlotRegions] = []
        var start = 121
        for _ in 0..<Int(header[120]) {
            let nameLength = Int(header[start + 23]) | Int(header[start + 24]) << 8
            result.append(SlotRegions(start: start, nameLength: nameLength))
            start = result.last!.end
        }
        return result
    }

    /// A vault on A, made with `--remember` when asked, with B enrolled by recovery.
    func twoMachineVault(
        _ w: CLIWorld, remember: Bool
    ) throws -> (vault: String, pwA: String, pwB: String, phrase: String) {
        let (vault, pwA, phrase) = try w.makeVault(remember: remember)
        try w.run(["put", vault, pwA, "/kept.txt", "--passphrase-file", pwA])
        let pwB = w.file("pw-b", "the desktop's own passphrase\n")
        try w.run(
            ["recover", vault, "--recovery-phrase-file", phrase, "--new-passphrase-file", pwB, "--device-name", "b"],
            environment: machineB(w))
        return (vault, pwA, pwB, phrase)
    }

    /// The review's scenario: a flipped bit in the recovery envelope, then `verify --repair` with the
    /// passphrase. The repair must not rewrite the MAC over an envelope it cannot check (that hid the
    /// damage until the day the phrase was needed); with the phrase it says the envelope does not open;
    /// a new recovery phrase replaces the envelope, and then the whole header is sound again.
    func testARepairDoesNotVouchForARecoveryEnvelopeItCannotCheck() throws {
        let w = try CLIWorld()
        let (vault, pw, phrase) = try w.makeVault()
        try w.run(["put", vault, pw, "/kept.txt", "--passphrase-file", pw])
        var header = try readHeader(vault)
        header[100] ^= 0x01  // inside the recovery envelope
        try writeHeader(header, vault)

        let withoutPhrase = try w.run(["verify", vault, "--repair", "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(withoutPhrase.stderr.contains("was not repaired"), withoutPhrase.stderr)
        XCTAssertTrue(withoutPhrase.stderr.contains("--recovery-phrase-file"), withoutPhrase.stderr)
        XCTAssertEqual(try readHeader(vault), header, "a refused repair leaves the header as it was")

        let withPhrase = try w.run(
            ["verify", vault, "--repair", "--passphrase-file", pw, "--recovery-phrase-file", phrase], expect: 13)
        XCTAssertTrue(withPhrase.stderr.contains("does not open with this recovery phrase"), withPhrase.stderr)
        XCTAssertEqual(try readHeader(vault), header)
        // Still damaged, still said so by a plain verify.
        let plain = try w.run(["verify", vault, "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(plain.stdout.contains("DAMAGED vault.header"), plain.stdout)

        let newPhrase = w.root + "/new-phrase.txt"
        let replaced = try w.run(
            ["verify", vault, "--repair", "--passphrase-file", pw, "--new-recovery-phrase-out", newPhrase])
        XCTAssertTrue(replaced.stderr.contains("recovery envelope replaced"), replaced.stderr)
        XCTAssertTrue(replaced.stdout.contains("all intact"), replaced.stdout)
        let mode = try FileManager.default.attributesOfItem(atPath: newPhrase)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        let newWords = try String(contentsOfFile: newPhrase, encoding: .utf8)
        XCTAssertFalse(replaced.stdout.contains(newWords.trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertFalse(replaced.stderr.contains(newWords.trimmingCharacters(in: .whitespacesAndNewlines)))
        let checked = try w.run(["verify", vault, "--passphrase-file", pw, "--recovery-phrase-file", newPhrase])
        XCTAssertTrue(checked.stdout.contains("and the recovery phrase: all intact"), checked.stdout)
        try w.run(["verify", vault, "--recovery-phrase-file", phrase], expect: 12)
        try w.run(["mkdir", vault, "/writable-again", "--passphrase-file", pw])
        let kept = try w.run(["get", vault, "/kept.txt", "-", "--passphrase-file", pw])
        XCTAssertEqual(kept.stdout, "correct horse battery\n")
    }

    /// Damage outside the recovery envelope (a slot's name): with the phrase shown to open the
    /// envelope, `verify --repair` rewrites the checksum and MAC, and the old phrase keeps working.
    func testARepairWithTheRecoveryPhraseKeepsIt() throws {
        let w = try CLIWorld()
        let (vault, pw, phrase) = try w.makeVault()
        var header = try readHeader(vault)
        header[slots(header)[0].start + 25] ^= 0x01  // the first byte of the slot's name
        try writeHeader(header, vault)
        try w.run(["verify", vault, "--repair", "--passphrase-file", pw], expect: 13)
        let repaired = try w.run([
            "verify", vault, "--repair", "--passphrase-file", pw, "--recovery-phrase-file", phrase,
        ])
        XCTAssertTrue(repaired.stderr.contains("Repaired: vault.header"), repaired.stderr)
        XCTAssertTrue(repaired.stdout.contains("all intact"), repaired.stdout)
        try w.run(["verify", vault, "--recovery-phrase-file", phrase])
        try w.run(["mkdir", vault, "/writable-again", "--passphrase-file", pw])
    }

    /// The reviewer's case: the chunk size changed (every envelope fails, its AAD holds it) on a
    /// device that remembers the master key. A repair with the remembered key alone would seal the
    /// wrong chunk size under a new MAC: it is refused, and the header is left as it was.
    func testARememberedKeyAloneDoesNotRewriteTheHeader() throws {
        let w = try CLIWorld()
        let (vault, _, _) = try w.makeVault(remember: true)
        var header = try readHeader(vault)
        header[22] ^= 0x01
        try writeHeader(header, vault)
        let newPhrase = w.root + "/new-phrase.txt"
        let r = try w.run(["verify", vault, "--repair", "--new-recovery-phrase-out", newPhrase], expect: 9)
        XCTAssertTrue(r.stderr.contains("was not rewritten"), r.stderr)
        XCTAssertEqual(try readHeader(vault), header)
        XCTAssertFalse(FileManager.default.fileExists(atPath: newPhrase), "no phrase file that opens nothing")
    }

    /// A flipped bit in this device's salt ID hides its slot: the right credential still opens a slot
    /// with this device's salt, so the vault reads with a warning instead of "no slot for this device".
    func testADamagedSaltIDStillOpensWithTheRightCredential() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault()
        try w.run(["put", vault, pw, "/kept.txt", "--passphrase-file", pw])
        var header = try readHeader(vault)
        header[slots(header)[0].start + 7] ^= 0x01
        try writeHeader(header, vault)
        let read = try w.run(["get", vault, "/kept.txt", "-", "--passphrase-file", pw])
        XCTAssertEqual(read.stdout, "correct horse battery\n")
        XCTAssertTrue(read.stderr.contains("vault.header fails its checksum or MAC"), read.stderr)
        let wrong = w.file("wrong", "not the passphrase\n")
        let refused = try w.run(["get", vault, "/kept.txt", "-", "--passphrase-file", wrong], expect: 13)
        XCTAssertTrue(refused.stderr.contains("damaged"), refused.stderr)
    }

    /// A slot's envelope changed with the checksum recomputed: the credential alone cannot tell it from
    /// a wrong credential, a remembered master key can (its MAC check needs no credential).
    func testARememberedKeyTellsAnAlteredSlotFromAWrongCredential() throws {
        let w = try CLIWorld()
        let (vault, pw, _) = try w.makeVault(remember: true)
        // An intact header with a remembered key and a wrong credential is a wrong credential.
        let wrong = w.file("wrong", "not the passphrase\n")
        try w.run(["ls", vault, "/", "--passphrase-file", wrong], expect: 12)
        var altered = try readHeader(vault)
        let slot = slots(altered)[0]
        altered[slot.start + 25 + slot.nameLength + 22] ^= 0x01
        try writeHeader(try withChecksumRecomputed(altered, w), vault)
        let damaged = try w.run(["ls", vault, "/", "--passphrase-file", pw], expect: 13)
        XCTAssertTrue(damaged.stderr.contains("damaged"), damaged.stderr)
        XCTAssertFalse(damaged.stderr.contains("wrong credential"), damaged.stderr)
        try w.run(["forget", vault])
        let unknown = try w.run(["ls", vault, "/", "--passphrase-file", pw], expect: 12)
        XCTAssertTrue(unknown.stderr.contains("wrong credential"), unknown.stderr)
    }

    /// Two slots; a bit flipped in each region and the checksum recomputed, so only the MAC (or an
    /// envelope) can find it. Machine B, with only its credential, finds every change outside its own
    /// slot; a change inside its own slot that its credential cannot tell from a wrong one is found
    /// with the recovery phrase. Machine A, which remembers the master key, finds every change.
    func testEachRegionAlteredWithTheChecksumRecomputedIsFound() throws {
        let w = try CLIWorld()
        let (vault, pwA, pwB, phrase) = try twoMachineVault(w, remember: true)
        let b = machineB(w)
        let original = try readHeader(vault)
        let slotList = slots(original)
        XCTAssertEqual(slotList.count, 2)
        XCTAssertEqual(slotList[1].end + 64, original.count)
        let common: [(String, Int)] = [
            ("vault ID", 10), ("chunk size", 22), ("reserved", 23), ("recovery count", 24), ("recovery salt", 40),
            ("recovery nonce", 64), ("recovery envelope", 100), ("slot count", 120), ("MAC", original.count - 50),
        ]
        let ownSlotOfB = Set(slotList[1].all("B").map(\.1))
        // Every envelope's AAD holds the vault ID and chunk size: changed with the checksum recomputed,
        // they fail every envelope alike, which only a remembered key tells from a wrong credential —
        // and the vault ID is what finds a remembered key (docs/SECURITY.md). Found, never "all intact".
        let vaultID = 10
        let chunkSize = 22
        for (region, offset) in common + slotList[0].all("A") + slotList[1].all("B") {
            var altered = original
            altered[offset] ^= 0x01
            try writeHeader(try withChecksumRecomputed(altered, w), vault)

            let onA = try w.run(["verify", vault, "--passphrase-file", pwA], expect: nil)
            XCTAssertFalse(onA.stdout.contains("all intact"), "A, \(region)")
            let onB = try w.run(["verify", vault, "--passphrase-file", pwB], environment: b, expect: nil)
            XCTAssertFalse(onB.stdout.contains("all intact"), "B, \(region)")
            if offset == vaultID || offset == chunkSize {
                XCTAssertEqual(onA.status, offset == vaultID ? 12 : 13, "A, \(region): \(onA.stderr)")
                XCTAssertEqual(onB.status, 12, "B, \(region): \(onB.stderr)")
                continue
            }
            XCTAssertEqual(onA.status, 13, "A, \(region): \(onA.stderr)")
            if ownSlotOfB.contains(offset) {
                XCTAssertNotEqual(onB.status, 0, "B, \(region)")
                let byPhrase = try w.run(
                    ["verify", vault, "--recovery-phrase-file", phrase], environment: b, expect: nil)
                XCTAssertEqual(byPhrase.status, 13, "B by the phrase, \(region): \(byPhrase.stderr)")
            } else {
                XCTAssertEqual(onB.status, 13, "B, \(region): \(onB.stderr)")
            }
        }
        try writeHeader(original, vault)
        try w.run(["verify", vault, "--passphrase-file", pwA])
        try w.run(["verify", vault, "--passphrase-file", pwB], environment: b)
    }
}
