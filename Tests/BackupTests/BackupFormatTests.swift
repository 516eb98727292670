import VaultBackup
import VaultCrypto
import VaultFormat
import XCTest

/// The backup format's own structures: the sealed manifest and its paths.
final class BackupFormatTests: XCTestCase {
    let master = SecureBytes(copying: Array(0..<32))

    func sample() -> Manifest {
        Manifest(
            vaultID: [UInt8](repeating: 0xaa, count: 16), id: 7, headerHash: [UInt8](repeating: 0xbb, count: 32),
            created: 1_700_000_000_000_000_000, generation: 42, files: 2, fileBytes: 1234,
            entries: [
                .init(path: "index/snapshot", size: 100, hash: [UInt8](repeating: 1, count: 32)),
                .init(
                    path: "blobs/ab/" + String(repeating: "c", count: 30), size: 4680,
                    hash: [UInt8](repeating: 2, count: 32)),
            ])
    }

    func testAManifestOpensToWhatWasSealed() throws {
        let m = sample()
        XCTAssertEqual(try Manifest(opening: try m.sealed(master: master), master: master), m)
    }

    func testEveryBitFlipOfASealedManifestIsRefused() throws {
        let sealed = try sample().sealed(master: master)
        var accepted = 0
        for i in 0..<sealed.count * 8 {
            var b = sealed
            b[i / 8] ^= UInt8(1 << (i % 8))
            if (try? Manifest(opening: b, master: master)) != nil { accepted += 1 }
        }
        XCTAssertEqual(accepted, 0)
    }

    func testAManifestOpensOnlyWithItsMasterKey() throws {
        let sealed = try sample().sealed(master: master)
        XCTAssertThrowsError(
            try Manifest(opening: sealed, master: SecureBytes(copying: [UInt8](repeating: 9, count: 32))))
    }

    func testOnlyVaultFilesAreValidPaths() {
        let good = [
            "index/snapshot", "index/journal", "blobs/0f/" + String(repeating: "a", count: 30),
            "thumbs/ff/" + String(repeating: "0", count: 30),
        ]
        let bad = [
            "vault.header", "../x", "/etc/passwd", "blobs/../../etc/x", "blobs/0f/" + String(repeating: "A", count: 30),
            "blobs/0f/" + String(repeating: "a", count: 31), "index/../x",
            "blobs/0f/../" + String(repeating: "a", count: 27),
        ]
        XCTAssertEqual(good.filter(Manifest.isVaultPath), good)
        XCTAssertEqual(bad.filter(Manifest.isVaultPath), [])
    }

    func testManifestKeyVector() throws {
        let key = try BackupFormat.manifestKey(master: master)
        XCTAssertEqual(
            key.withUnsafeBytes { Array($0) }.hex, "62ddac7b47d33ea4a51066966911bc1cd80e4fabc67fca259492b90cfaee6932")
    }

    func testObjectAndSnapshotNames() {
        XCTAssertEqual(
            BackupFormat.objectPath([0xab] + [UInt8](repeating: 0xcd, count: 31)),
            "objects/ab/" + String(repeating: "cd", count: 31))
        XCTAssertEqual(BackupFormat.snapshotPath(42), "snapshots/0000000042")
    }
}

/// The backup header carries a vault header's backup and recovery envelopes so that they open
/// without the device salt, and refuses what it does not know.
final class BackupHeaderTests: XCTestCase {
    let passphrase = "correct horse battery"
    let phrase = SecureBytes(copying: Array("a normalized recovery phrase stands in here".utf8))

    func makeHeader() throws -> (VaultHeader, SecureBytes) {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        return try VaultHeader.create(
            credential: .passphrase(SecureBytes(copying: Array(passphrase.utf8))), pattern: nil,
            deviceSalt: SecureBytes(copying: [UInt8](repeating: 0x11, count: 32)), deviceName: "test",
            iterations: 1000, recoveryPhrase: phrase, recoveryIterations: 1000, chunkSizeLog2: 12, now: 0)
    }

    /// The backup header `backup` makes: the recovery envelope, and a backup envelope for the passphrase.
    func backupHeader(of vaultHeader: VaultHeader, master: SecureBytes) throws -> BackupHeader {
        try BackupHeader(
            of: vaultHeader, slot: vaultHeader.slots[0],
            backup: try vaultHeader.makeBackupEnvelope(
                master: master, credential: .passphrase(SecureBytes(copying: Array(passphrase.utf8))),
                iterations: 1000))
    }

    func testItOpensWithThePassphraseOrThePhraseAloneAndParsesBack() throws {
        let (vaultHeader, master) = try makeHeader()
        let header = try backupHeader(of: vaultHeader, master: master)
        XCTAssertEqual(header.bytes.count, BackupHeader.encodedSize)
        XCTAssertEqual(try BackupHeader(decoding: header.bytes), header)
        XCTAssertTrue(
            try header.unlock(credential: .passphrase(SecureBytes(copying: Array(passphrase.utf8)))).constantTimeEquals(
                master))
        XCTAssertTrue(try header.unlock(recoveryPhrase: phrase).constantTimeEquals(master))
        XCTAssertThrowsError(
            try header.unlock(credential: .passphrase(SecureBytes(copying: Array("wrong passphrase".utf8))))
        ) {
            XCTAssertEqual($0 as? FormatError, .wrongCredential)
        }
    }

    func testAnotherVersionOrSizeIsRefused() throws {
        let (vaultHeader, master) = try makeHeader()
        let header = try backupHeader(of: vaultHeader, master: master)
        var newer = header.bytes
        newer[4] = 2
        XCTAssertThrowsError(try BackupHeader(decoding: newer)) {
            XCTAssertEqual($0 as? BackupFormatError, .unsupportedVersion(2))
        }
        XCTAssertThrowsError(try BackupHeader(decoding: Array(header.bytes.dropLast())))
    }

    func testAnEnvelopeBitFlipDoesNotOpen() throws {
        let (vaultHeader, master) = try makeHeader()
        let bytes = try backupHeader(of: vaultHeader, master: master).bytes
        // vault format version, vault ID, chunk size, backup count, nonce, sealed key, tag
        for offset in [8, 20, 28, 131, 140, 150, 192] {
            var b = bytes
            b[offset] ^= 0x01
            let opened = (try? BackupHeader(decoding: b)).flatMap {
                try? $0.unlock(credential: .passphrase(SecureBytes(copying: Array(passphrase.utf8))))
            }
            XCTAssertNil(opened, "offset \(offset)")
        }
    }
}
