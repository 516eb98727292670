import Foundation
import XCTest

@testable import VaultCrypto
@testable import VaultKeychain
@testable import VaultSystem

final class FileKeychainTests: XCTestCase {
    var dir = ""
    override func setUp() { dir = "/tmp/vaultaire-fk-\(getpid())-\(UInt32.random(in: 0...UInt32.max))/keychain" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: FileSystem.parent(of: dir)) }

    func testLifecycleModesAndBase64() throws {
        let keychain = Keychain(backend: FileKeychain(directory: dir))
        let vault: [UInt8] = [9, 9, 9]
        let key = try SecureBytes(randomCount: 32)
        try keychain.deleteMasterKey(for: vault)
        try keychain.storeMasterKey(key, for: vault)
        XCTAssertEqual(try keychain.getMasterKey(for: vault), key)
        let item = dir + "/" + KeychainItem.masterKey(vaultID: vault).account
        XCTAssertEqual(FileSystem.fileMode(dir)!.mode & 0o777, 0o700)
        XCTAssertEqual(FileSystem.fileMode(item)!.mode & 0o777, 0o600)
        // Stored as base64 of the key, as seed 003 asks.
        let text = try String(contentsOfFile: item, encoding: .utf8)
        XCTAssertEqual(Data(base64Encoded: text).map { Array($0) }, key.withUnsafeBytes { Array($0) })
        // Modes others could use are refused on read.
        chmod(item, 0o644)
        XCTAssertThrowsError(try keychain.getMasterKey(for: vault)) {
            guard case KeychainError.insecureStorage = $0 else { return XCTFail("\($0)") }
        }
        chmod(item, 0o600)
        chmod(dir, 0o755)
        XCTAssertThrowsError(try keychain.getMasterKey(for: vault))
        chmod(dir, 0o700)
        try keychain.deleteMasterKey(for: vault)
        XCTAssertThrowsError(try keychain.getMasterKey(for: vault)) { XCTAssertEqual($0 as? KeychainError, .notFound) }
        // The device salt is made once and then kept.
        let salt = try keychain.deviceSalt(create: true)
        XCTAssertEqual(try keychain.deviceSalt(create: false), salt)
    }

    func testBase64MatchesFoundation() throws {
        for n in 0..<70 {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255) }
            let encoded = Base64.encode(SecureBytes(copying: bytes))
            let text = encoded.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            XCTAssertEqual(text, Data(bytes).base64EncodedString())
            XCTAssertEqual(Base64.decode(encoded)?.withUnsafeBytes { Array($0) }, bytes)
        }
        XCTAssertNil(Base64.decode(SecureBytes(copying: Array("ab!=".utf8))))
    }
}
