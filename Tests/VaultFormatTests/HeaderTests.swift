import Foundation
import XCTest

@testable import VaultCrypto
@testable import VaultFormat

final class HeaderTests: XCTestCase {
    override func setUp() { setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1) }

    let passphrase = Credential.passphrase(SecureBytes(copying: Array("correct horse battery".utf8)))

    func makeHeader(
        _ passphrase: String = "correct horse battery"
    ) throws -> (VaultHeader, SecureBytes, SecureBytes, SecureBytes) {
        let salt = try SecureBytes(randomCount: 32)
        let phrase = try RecoveryPhrase.validate(
            try RecoveryPhrase.generate(words: try Wordlist.load()), words: try Wordlist.load())
        let (header, master) = try VaultHeader.create(
            credential: .passphrase(SecureBytes(copying: Array(passphrase.utf8))), pattern: nil, deviceSalt: salt,
            deviceName: "laptop", iterations: 1000, recoveryPhrase: phrase, recoveryIterations: 1000,
            chunkSizeLog2: 15, now: 1_700_000_000)
        return (header, master, salt, phrase)
    }

    /// The checked-in version-1 header (Tests/VaultFSTests/Fixtures/vault-v1) and its device salt.
    func version1Header() throws -> ([UInt8], SecureBytes) {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("VaultFSTests/Fixtures").path
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: fixtures + "/vault-v1/vault.header")))
        let salt = [UInt8](try Data(contentsOf: URL(fileURLWithPath: fixtures + "/vault-v1.device-salt")))
        return (bytes, SecureBytes(copying: salt))
    }

    func testUnlockAndRecoveryOpenTheSameMasterKey() throws {
        let (header, master, salt, phrase) = try makeHeader()
        let decoded = try VaultHeader(decoding: header.encoded())
        XCTAssertEqual(decoded, header)
        XCTAssertEqual(decoded.version, 2)
        XCTAssertEqual(decoded.slots.map(\.name), ["laptop"])
        XCTAssertTrue(decoded.checksumMatches)
        XCTAssertTrue(decoded.isAuthentic(master: master))
        XCTAssertEqual(try decoded.unlock(credential: passphrase, deviceSalt: salt), master)
        XCTAssertEqual(try decoded.unlock(recoveryPhrase: phrase), master)
        XCTAssertFalse(decoded.isAuthentic(master: try SecureBytes(randomCount: 32)))
    }

    func testWrongCredentialAndWrongDeviceAreToldApart() throws {
        let (header, _, salt, _) = try makeHeader()
        XCTAssertThrowsError(
            try header.unlock(credential: .passphrase(SecureBytes(copying: Array("wrong one!".utf8))), deviceSalt: salt)
        ) {
            XCTAssertEqual($0 as? FormatError, .wrongCredential)
        }
        XCTAssertThrowsError(try header.unlock(credential: passphrase, deviceSalt: try SecureBytes(randomCount: 32))) {
            XCTAssertEqual($0 as? FormatError, .deviceMismatch)
        }
    }

    /// A second device gets a slot of its own; changing one device's credential leaves the other's.
    func testSlotsOfTwoDevicesAreIndependent() throws {
        var (header, master, saltA, phrase) = try makeHeader()
        let saltB = try SecureBytes(randomCount: 32)
        let other = Credential.passphrase(SecureBytes(copying: Array("desktop passphrase".utf8)))
        try header.setSlot(
            master: master, credential: other, pattern: nil, deviceSalt: saltB, name: "desktop", iterations: 1000,
            now: 1_700_000_100)
        XCTAssertEqual(header.slots.map(\.name), ["laptop", "desktop"])
        let new = Credential.passphrase(SecureBytes(copying: Array("a brand new secret".utf8)))
        try header.setSlot(
            master: master, credential: new, pattern: nil, deviceSalt: saltA, name: "laptop", iterations: 2000,
            now: 1_700_000_200)
        let decoded = try VaultHeader(decoding: header.encoded())
        XCTAssertEqual(decoded.slots.count, 2)
        XCTAssertTrue(decoded.isAuthentic(master: master))
        XCTAssertEqual(try decoded.unlock(credential: new, deviceSalt: saltA), master)
        XCTAssertEqual(try decoded.unlock(credential: other, deviceSalt: saltB), master)
        XCTAssertEqual(try decoded.unlock(recoveryPhrase: phrase), master)
        XCTAssertThrowsError(try decoded.unlock(credential: passphrase, deviceSalt: saltA))
        var removing = decoded
        try removing.removeSlot(at: 0, master: master)
        XCTAssertEqual(removing.slots.map(\.name), ["desktop"])
        XCTAssertThrowsError(try removing.removeSlot(at: 0, master: master))
        XCTAssertThrowsError(try removing.unlock(credential: new, deviceSalt: saltA)) {
            XCTAssertEqual($0 as? FormatError, .deviceMismatch)
        }
    }

    /// Any bit flipped anywhere — prefix, recovery envelope, a slot, the MAC, the checksum — is found
    /// without the recovery phrase: by the parser, the checksum, or the MAC once the slot opened.
    func testEveryBitFlipOfTheHeaderIsDetected() throws {
        let (header, master, _, _) = try makeHeader()
        let bytes = header.encoded()
        var undetected: [Int] = []
        for bit in 0..<(bytes.count * 8) {
            var b = bytes
            b[bit / 8] ^= 1 << (bit % 8)
            guard let h = try? VaultHeader(decoding: b) else { continue }
            if h.checksumMatches && h.isAuthentic(master: master) { undetected.append(bit) }
        }
        XCTAssertEqual(undetected, [])
    }

    /// An attacker who rewrites the checksum too is still caught: a flip outside the envelopes fails
    /// the MAC; inside this device's slot, the slot no longer opens; inside the recovery envelope, the MAC.
    func testAlterationsWithARecomputedChecksumAreDetected() throws {
        let (header, master, salt, _) = try makeHeader()
        let bytes = header.encoded()
        let body = bytes.count - 32
        var undetected: [Int] = []
        // Iteration fields make the KDF slower when their upper bytes flip; the low byte stands for them.
        let slowBytes: Set<Int> = [25, 26, 27, 125, 126, 127]
        for offset in 0..<body where !slowBytes.contains(offset) {
            var b = bytes
            b[offset] ^= 0x01
            b.replaceSubrange(body..<bytes.count, with: try Digest.sha256(Array(b[0..<body])))
            guard let h = try? VaultHeader(decoding: b) else { continue }
            XCTAssertTrue(h.checksumMatches)
            guard let key = try? h.unlock(credential: passphrase, deviceSalt: salt) else { continue }
            XCTAssertEqual(key, master)
            if h.isAuthentic(master: key) { undetected.append(offset) }
        }
        XCTAssertEqual(undetected, [])
    }

    /// A version-1 header reads as one slot and its backup envelope; resealed as version 2 its
    /// envelopes open unchanged (the migration), and the backup envelope is gone.
    func testAVersion1HeaderMigratesWithItsEnvelopesUnchanged() throws {
        let (bytes, salt) = try version1Header()
        let v1 = try VaultHeader(decoding: bytes)
        XCTAssertEqual(v1.version, 1)
        XCTAssertEqual(v1.slots.count, 1)
        XCTAssertNotNil(v1.legacyBackup)
        let credential = Credential.passphrase(SecureBytes(copying: Array("fixture passphrase v1".utf8)))
        let master = try v1.unlock(credential: credential, deviceSalt: salt)
        XCTAssertTrue(v1.isAuthentic(master: master))
        XCTAssertEqual(try v1.unlock(backup: try XCTUnwrap(v1.legacyBackup), credential: credential), master)
        var v2 = v1
        try v2.renameSlot(at: 0, to: "fixture machine", master: master)
        let decoded = try VaultHeader(decoding: v2.encoded())
        XCTAssertEqual(decoded.version, 2)
        XCTAssertNil(decoded.legacyBackup)
        XCTAssertEqual(decoded.slots[0].sealed, v1.slots[0].sealed)
        XCTAssertEqual(decoded.recovery, v1.recovery)
        XCTAssertEqual(try decoded.unlock(credential: credential, deviceSalt: salt), master)
        XCTAssertTrue(decoded.isAuthentic(master: master))
    }

    /// A backup envelope made twice with the same credential is the same bytes (one backup header
    /// on the remote), and opens with the credential alone.
    func testBackupEnvelopesAreStableAndOpenWithoutTheDeviceSalt() throws {
        let (header, master, _, _) = try makeHeader()
        let a = try header.makeBackupEnvelope(master: master, credential: passphrase, iterations: 1000)
        let b = try header.makeBackupEnvelope(master: master, credential: passphrase, iterations: 1000)
        XCTAssertEqual(a, b)
        XCTAssertNotEqual(a, try header.makeBackupEnvelope(master: master, credential: passphrase, iterations: 1001))
        XCTAssertEqual(try header.unlock(backup: a, credential: passphrase), master)
        XCTAssertThrowsError(
            try header.unlock(backup: a, credential: .passphrase(SecureBytes(copying: Array("other".utf8))))
        ) { XCTAssertEqual($0 as? FormatError, .wrongCredential) }
    }

    /// Fields nothing has authenticated yet are range-checked when decoded (issue 22, finding 4): a
    /// pattern grid of 255 columns used to trap in the pattern parser (exit 132).
    func testOutOfRangeFieldsAreMalformedNotATrap() throws {
        let (v1, _) = try version1Header()
        let (header, _, _, _) = try makeHeader()
        // (kind, rows, columns, iteration counts) offsets in each version.
        for (bytes, kind, counts) in [(v1, 24, [27, 99, 195]), (header.encoded(), 121, [24, 124])] {
            var pattern = bytes
            pattern[kind] = Credential.Kind.pattern.rawValue
            for (rows, columns) in [(4, 0xFF), (0xFF, 4), (0, 0), (1, 4), (4, 10)] as [(UInt8, UInt8)] {
                var b = pattern
                b[kind + 1] = rows
                b[kind + 2] = columns
                XCTAssertThrowsError(try VaultHeader(decoding: b), "\(rows)×\(columns)") {
                    guard case FormatError.malformed = $0 else { return XCTFail("\($0)") }
                }
            }
            var passphrase = bytes
            passphrase[kind + 2] = 4
            XCTAssertThrowsError(try VaultHeader(decoding: passphrase)) {
                guard case FormatError.malformed = $0 else { return XCTFail("\($0)") }
            }
            for offset in counts {  // iteration counts, set to 0 and to 2^32 - 1
                for value: [UInt8] in [[0, 0, 0, 0], [0xFF, 0xFF, 0xFF, 0xFF]] {
                    var b = bytes
                    b.replaceSubrange(offset..<offset + 4, with: value)
                    XCTAssertThrowsError(try VaultHeader(decoding: b), "iterations at \(offset)")
                }
            }
        }
        var noSlots = header.encoded()
        noSlots[120] = 0
        XCTAssertThrowsError(try VaultHeader(decoding: noSlots))
        // The parser itself refuses such grids with an error instead of overflowing.
        XCTAssertThrowsError(try Pattern(text: "a1-b2-c3-d4", rows: 4, columns: 0xFF))
        XCTAssertThrowsError(try Pattern(text: "a1-b2-c3-d4", rows: 0xFF, columns: 4))
    }

    func testWeakIterationsAreRefusedWithoutTheTestingOverride() throws {
        unsetenv("VAULTAIRE_ALLOW_WEAK_KDF")
        defer { setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1) }
        XCTAssertThrowsError(try KDFPolicy.check(1000, minimum: KDFPolicy.vaultIterations, what: "vault KDF"))
        XCTAssertNoThrow(try KDFPolicy.check(600_000, minimum: KDFPolicy.vaultIterations, what: "vault KDF"))
        XCTAssertThrowsError(try KDFPolicy.check(700_000, minimum: KDFPolicy.recoveryIterations, what: "recovery KDF"))
    }
}

final class CredentialTests: XCTestCase {
    func testPatternTextAndCanonicalBytes() throws {
        let p = try Pattern(text: "a1-b2-c3-d4")
        XCTAssertEqual(p.cells, [0, 5, 10, 15])
        XCTAssertEqual(p.text, "a1-b2-c3-d4")
        XCTAssertEqual(try Pattern(text: " A1 - b2-C3-d4 "), p)
        XCTAssertEqual(p.canonicalBytes, Array("vaultaire-pattern-v1".utf8) + [4, 4, 4, 0, 5, 10, 15])
    }

    func testBadPatternsAreRefused() {
        for bad in ["a1-b2-c3", "a1-a1-b2-c3", "a1-b2-c3-e4", "a1-b2-c3-d5", "x", ""] {
            XCTAssertThrowsError(try Pattern(text: bad), bad)
        }
    }

    /// A pattern's text is a credential: no error may repeat any of it (issue 22, finding 2).
    func testPatternErrorsRepeatNothingOfTheText() {
        for bad in ["correct horse battery", "b2-c3-zz9-d1", "b2-c3-d1-e2", "b2-q7"] {
            XCTAssertThrowsError(try Pattern(text: bad)) { error in
                let message = "\(error)"
                for part in bad.split(whereSeparator: { $0 == " " || $0 == "-" }) {
                    XCTAssertFalse(message.contains(part), "the message repeats '\(part)': \(message)")
                }
            }
        }
    }

    func testShortPassphrasesAreRefused() {
        XCTAssertThrowsError(try Credential.passphrase(SecureBytes(copying: Array("short".utf8))).checkStrength())
        XCTAssertNoThrow(try Credential.passphrase(SecureBytes(copying: Array("long enough".utf8))).checkStrength())
    }
}

final class RecoveryPhraseTests: XCTestCase {
    func testGeneratedPhrasesValidateAndNormalize() throws {
        let list = try Wordlist.load()
        let phrase = try RecoveryPhrase.generate(words: list)
        XCTAssertEqual(phrase.split(separator: " ").count, 24)
        let a = try RecoveryPhrase.validate(phrase, words: list)
        let messy = "  " + phrase.uppercased().replacingOccurrences(of: " ", with: " \t\n ") + " "
        XCTAssertEqual(try RecoveryPhrase.validate(messy, words: list), a)
    }

    func testChecksumAndWordErrors() throws {
        let list = try Wordlist.load()
        // BIP-39's all-zero-entropy phrase: 23 × "abandon" + "art" is valid; "abandon" × 24 is not.
        XCTAssertNoThrow(
            try RecoveryPhrase.validate(
                Array(repeating: "abandon", count: 23).joined(separator: " ") + " art", words: list))
        XCTAssertThrowsError(
            try RecoveryPhrase.validate(Array(repeating: "abandon", count: 24).joined(separator: " "), words: list)
        ) {
            XCTAssertEqual($0 as? RecoveryPhraseError, .badChecksum)
        }
        XCTAssertThrowsError(try RecoveryPhrase.validate("abandon zzzz", words: list))
        XCTAssertThrowsError(
            try RecoveryPhrase.validate(
                Array(repeating: "abandon", count: 22).joined(separator: " ") + " qqq art", words: list)
        ) {
            XCTAssertEqual($0 as? RecoveryPhraseError, .unknownWord(position: 23))
        }
    }
}
