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
/// second keychain, then files through a real mount and `put` (docs/FORMAT.md, its opening paragraphs).
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
