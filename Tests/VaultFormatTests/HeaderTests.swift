import XCTest

@testable import VaultCrypto
@testable import VaultFormat

final class HeaderTests: XCTestCase {
    override func setUp() { setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1) }

    func makeHeader(
        _ passphrase: String = "correct horse battery"
    ) throws -> (VaultHeader, SecureBytes, SecureBytes, SecureBytes) {
        let salt = try SecureBytes(randomCount: 32)
        let phrase = try RecoveryPhrase.validate(
            try RecoveryPhrase.generate(words: try Wordlist.load()), words: try Wordlist.load())
        let (header, master) = try VaultHeader.create(
            credential: .passphrase(SecureBytes(copying: Array(passphrase.utf8))), pattern: nil, deviceSalt: salt,
            iterations: 1000, recoveryPhrase: phrase, recoveryIterations: 1000, chunkSizeLog2: 15)
        return (header, master, salt, phrase)
    }

    func testUnlockRecoveryAndBackupOpenTheSameMasterKey() throws {
        let (header, master, salt, phrase) = try makeHeader()
        let decoded = try VaultHeader(decoding: header.encoded())
        XCTAssertEqual(decoded, header)
        let credential = Credential.passphrase(SecureBytes(copying: Array("correct horse battery".utf8)))
        XCTAssertEqual(try decoded.unlock(credential: credential, deviceSalt: salt), master)
        XCTAssertEqual(try decoded.unlock(recoveryPhrase: phrase), master)
        XCTAssertEqual(try decoded.unlockWithBackupKey(credential: credential), master)
    }

    func testWrongCredentialAndWrongDeviceAreToldApart() throws {
        let (header, _, salt, _) = try makeHeader()
        XCTAssertThrowsError(
            try header.unlock(credential: .passphrase(SecureBytes(copying: Array("wrong one!".utf8))), deviceSalt: salt)
        ) {
            XCTAssertEqual($0 as? FormatError, .wrongCredential)
        }
        let credential = Credential.passphrase(SecureBytes(copying: Array("correct horse battery".utf8)))
        XCTAssertThrowsError(try header.unlock(credential: credential, deviceSalt: try SecureBytes(randomCount: 32))) {
            XCTAssertEqual($0 as? FormatError, .deviceMismatch)
        }
    }

    func testRewrapChangesOnlyTheCredentialAndBackupEnvelopes() throws {
        var (header, master, salt, phrase) = try makeHeader()
        let before = header
        let new = Credential.passphrase(SecureBytes(copying: Array("a brand new secret".utf8)))
        try header.wrapForCredential(master, credential: new, pattern: nil, deviceSalt: salt, iterations: 2000)
        XCTAssertEqual(header.recovery, before.recovery)
        XCTAssertEqual(header.vaultID, before.vaultID)
        XCTAssertEqual(try header.unlock(credential: new, deviceSalt: salt), master)
        XCTAssertEqual(try header.unlock(recoveryPhrase: phrase), master)
        XCTAssertThrowsError(
            try header.unlock(
                credential: .passphrase(SecureBytes(copying: Array("correct horse battery".utf8))), deviceSalt: salt))
    }

    func testEveryBitFlipOfTheHeaderIsDetected() throws {
        let (header, master, salt, phrase) = try makeHeader()
        let bytes = header.encoded()
        let credential = Credential.passphrase(SecureBytes(copying: Array("correct horse battery".utf8)))
        var undetected: [Int] = []
        // Iteration fields (little-endian u32 at 27, 99 and 195): flipping their upper bytes only makes the KDF
        // slower before the AAD check fails; the low byte stands for them to keep this test fast.
        let slowBytes: Set<Int> = [28, 29, 30, 100, 101, 102, 196, 197, 198]
        for bit in 0..<(bytes.count * 8) where !slowBytes.contains(bit / 8) {
            var b = bytes
            b[bit / 8] ^= 1 << (bit % 8)
            guard let h = try? VaultHeader(decoding: b) else { continue }
            // Detected when any envelope no longer opens; an envelope that opens must give the true key.
            let keys = [
                try? h.unlock(credential: credential, deviceSalt: salt), try? h.unlock(recoveryPhrase: phrase),
                try? h.unlockWithBackupKey(credential: credential),
            ]
            for k in keys.compactMap({ $0 }) { XCTAssertEqual(k, master) }
            if keys.allSatisfy({ $0 != nil }) { undetected.append(bit) }
        }
        // Even the reserved byte (23) must be zero.
        XCTAssertEqual(undetected, [])
    }

    /// Fields nothing has authenticated yet are range-checked when decoded (issue 22, finding 4): a
    /// pattern grid of 255 columns used to trap in the pattern parser (exit 132).
    func testOutOfRangeFieldsAreMalformedNotATrap() throws {
        let (header, _, _, _) = try makeHeader()
        var pattern = header.encoded()
        pattern[24] = Credential.Kind.pattern.rawValue
        for (rows, columns) in [(4, 0xFF), (0xFF, 4), (0, 0), (1, 4), (4, 10)] as [(UInt8, UInt8)] {
            var b = pattern
            b[25] = rows
            b[26] = columns
            XCTAssertThrowsError(try VaultHeader(decoding: b), "\(rows)×\(columns)") {
                guard case FormatError.malformed = $0 else { return XCTFail("\($0)") }
            }
        }
        var passphrase = header.encoded()
        passphrase[26] = 4
        XCTAssertThrowsError(try VaultHeader(decoding: passphrase)) {
            guard case FormatError.malformed = $0 else { return XCTFail("\($0)") }
        }
        for offset in [27, 99, 195] {  // the three iteration counts, set to 0 and to 2^32 - 1
            for value: [UInt8] in [[0, 0, 0, 0], [0xFF, 0xFF, 0xFF, 0xFF]] {
                var b = header.encoded()
                b.replaceSubrange(offset..<offset + 4, with: value)
                XCTAssertThrowsError(try VaultHeader(decoding: b), "iterations at \(offset)")
            }
        }
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
