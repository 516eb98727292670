import Foundation
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultKeychain
@testable import VaultSystem

/// A vault written by format version 1, checked in with its passphrase and device salt: a change that
/// stops old vaults from opening fails here.
final class FixtureTests: XCTestCase {
    func testFormatVersion1VaultStillOpens() throws {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        let fixtures = try XCTUnwrap(Bundle.module.url(forResource: "Fixtures", withExtension: nil)).path
        let keychainDir = "/tmp/vaultaire-fixture-keychain-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: keychainDir) }
        try FileManager.default.createDirectory(
            atPath: keychainDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let salt = try Data(contentsOf: URL(fileURLWithPath: fixtures + "/vault-v1.device-salt"))
        _ = FileManager.default.createFile(
            atPath: keychainDir + "/device-salt", contents: salt, attributes: [.posixPermissions: 0o600])
        let keychain = Keychain(backend: FileKeychain(directory: keychainDir))
        let path = fixtures + "/vault-v1"
        let master = try VaultAccess.unwrapMasterKey(
            at: path, credential: .passphrase(SecureBytes(copying: Array("fixture passphrase v1".utf8))),
            keychain: keychain)
        let vault = try VaultAccess.open(at: path, master: master, keychain: nil, readOnly: true)
        XCTAssertEqual(
            String(decoding: try vault.readFile("/docs/hello.txt"), as: UTF8.self), "Hello from format version 1.\n")
        XCTAssertEqual(try vault.readFile("/forty-thousand-v.txt"), [UInt8](repeating: UInt8(ascii: "v"), count: 40000))
        XCTAssertTrue(vault.verify().isIntact)
        let phrase = try String(contentsOfFile: fixtures + "/vault-v1.recovery-phrase", encoding: .utf8)
        XCTAssertEqual(
            try VaultAccess.recoverMasterKey(at: path, phrase: phrase, wordlist: try Wordlist.load()), master)
        try vault.close()  // wipes the key schedule, which shares `master`
        XCTAssertTrue(master.constantTimeEquals([UInt8](repeating: 0, count: 32)))
    }
}

/// A vault written by format version 2 (header with two device slots, index version 2, blob layout 2
/// with a padded small file, a sparse file, a thumbnail), checked in with its passphrase, the first
/// slot's device salt and its recovery phrase: a change that stops version-2 vaults from opening
/// fails here. Made by this build: `init --device-name fixture-a`, `recover --device-name fixture-b` on a
/// second keychain, then files through a real mount and `put` (docs/FORMAT.md, "Test vectors").
final class FixtureV2Tests: XCTestCase {
    func testFormatVersion2VaultOpens() throws {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        let fixtures = try XCTUnwrap(Bundle.module.url(forResource: "Fixtures", withExtension: nil)).path
        let keychainDir = "/tmp/vaultaire-fixture2-keychain-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: keychainDir) }
        try FileManager.default.createDirectory(
            atPath: keychainDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let salt = try Data(contentsOf: URL(fileURLWithPath: fixtures + "/vault-v2.device-salt"))
        _ = FileManager.default.createFile(
            atPath: keychainDir + "/device-salt", contents: salt, attributes: [.posixPermissions: 0o600])
        let keychain = Keychain(backend: FileKeychain(directory: keychainDir))
        let path = fixtures + "/vault-v2"
        let header = try VaultAccess.readHeader(at: path)
        XCTAssertEqual(header.version, 2)
        XCTAssertEqual(header.slots.map(\.name), ["fixture-a", "fixture-b"])
        let master = try VaultAccess.unwrapMasterKey(
            at: path, credential: .passphrase(SecureBytes(copying: Array("fixture passphrase v2".utf8))),
            keychain: keychain)
        XCTAssertTrue(header.isAuthentic(master: master))
        let vault = try VaultAccess.open(at: path, master: master, keychain: nil, readOnly: true)
        XCTAssertEqual(vault.indexFormat.version, 2)
        XCTAssertEqual(
            String(decoding: try vault.readFile("/docs/hello.txt"), as: UTF8.self), "Hello from format version 2.\n")
        XCTAssertEqual(try vault.readFile("/forty-thousand-v.txt"), [UInt8](repeating: UInt8(ascii: "v"), count: 40000))
        XCTAssertEqual(try vault.readFile("/one-byte"), Array("x".utf8))
        let sparse = try vault.readFile("/sparse")
        XCTAssertEqual(sparse.count, 1_000_003)
        XCTAssertEqual(Array(sparse[0..<1_000_000]), [UInt8](repeating: 0, count: 1_000_000))
        XCTAssertEqual(Array(sparse[1_000_000...]), Array("end".utf8))
        let picture = try vault.resolve("/pictures-gradient.png")
        XCTAssertNotNil(try vault.thumbnails(picture.id))
        XCTAssertTrue(vault.verify().isIntact)
        // The one-byte file's blob takes one host block's worth: header, one padded chunk.
        let oneByte = try vault.resolve("/one-byte")
        let blob = try FileSystem.readFile(try vault.layout.blobFile(oneByte.blobID).path)
        XCTAssertEqual(blob[4], 2)
        XCTAssertLessThanOrEqual(blob.count, 4096)
        let phrase = try String(contentsOfFile: fixtures + "/vault-v2.recovery-phrase", encoding: .utf8)
        XCTAssertEqual(
            try VaultAccess.recoverMasterKey(at: path, phrase: phrase, wordlist: try Wordlist.load()), master)
        try vault.close()
    }
}

/// The test vectors printed in docs/FORMAT.md, computed by this implementation.
final class FormatVectorTests: XCTestCase {
    func testDocumentedVectors() throws {
        let master = SecureBytes(copying: Array(0..<32) as [UInt8])
        let keys = try KeySchedule(master: master)
        XCTAssertTrue(
            keys.index.constantTimeEquals(
                [UInt8](hex: "b492a5158211004d5cba5acdef3c8a7ad31c2583959af1fc809696dd03e4df89")!))
        XCTAssertTrue(
            keys.fileHeader.constantTimeEquals(
                [UInt8](hex: "6057fefbf1bebbd6acbd0dffcc1d0396c53240b98c1cd584cf08abfdc2f9dd2d")!))
        XCTAssertTrue(
            keys.thumbnail.constantTimeEquals(
                [UInt8](hex: "4c47aa4ceaa21be382d5c1267fd136b998987da54d15fc24be431fbd25a7e6ac")!))
        let salt = SecureBytes(copying: [UInt8](repeating: 0x11, count: 32))
        let vaultKey = try VaultHeader.vaultKey(
            credential: .passphrase(SecureBytes(copying: Array("correct horse battery".utf8))), deviceSalt: salt,
            iterations: 1000)
        XCTAssertTrue(
            vaultKey.constantTimeEquals(
                [UInt8](hex: "814bc97a41ba6d176e0e9afbb6a11e88611999ecb10c689bc09704fbf7750749")!))
        XCTAssertEqual(try VaultHeader.saltID(of: salt).hex, "a0d3f290a70a2fe7")
        let patternKey = try VaultHeader.vaultKey(
            credential: .pattern(try Pattern(text: "a1-b2-c3-d4")), deviceSalt: salt, iterations: 1000)
        XCTAssertTrue(
            patternKey.constantTimeEquals(
                [UInt8](hex: "63d4cf87f435b9ca6fdf295599daa70c8ad78ec7abe335dd3395f4f5cf747401")!))
        let sealed = try AESGCM.seal(
            [UInt8](repeating: 0x41, count: 4096), using: SecureBytes(copying: [UInt8](repeating: 0x22, count: 32)),
            nonce: [UInt8](repeating: 0x33, count: 12),
            authenticating: [UInt8](hex: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb010000000000000001")!)
        XCTAssertEqual(Array(sealed.prefix(16)).hex, "378287ab346d372949acda3154904cd3")
        XCTAssertEqual(Array(sealed.suffix(16)).hex, "1823c50879a8ae88753046aa363fdc85")
        // Format version 2: the header MAC's key and a MAC, and the backup envelope's derived nonce.
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        XCTAssertEqual(
            try VaultHeader.mac(of: Array("abc".utf8), master: master).hex,
            "20d6115f7f893766447291a7a6cc19ffbcd4ffed3ca441e2ee6f60a5d686b8b7")
        XCTAssertTrue(
            try KeyDerivation.subkey(of: master, label: VaultHeader.macLabel).constantTimeEquals(
                [UInt8](hex: "9675da3f7f4f71c72e00e8805f1e3a01306269dd5bed1e6a58303cc962c287a0")!))
        let (header, _) = try VaultHeader.create(
            credential: .passphrase(SecureBytes(copying: Array("correct horse battery".utf8))), pattern: nil,
            deviceSalt: salt, deviceName: "vector", iterations: 1000,
            recoveryPhrase: SecureBytes(copying: Array("phrase".utf8)), recoveryIterations: 1000, chunkSizeLog2: 12,
            now: 0)
        let envelope = try header.makeBackupEnvelope(
            master: master, credential: .passphrase(SecureBytes(copying: Array("correct horse battery".utf8))),
            iterations: 1000)
        XCTAssertEqual(envelope.nonce.hex, "526ea4b4b032ebdbd4ff4f14")
    }
}
