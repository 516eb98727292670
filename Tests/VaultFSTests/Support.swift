import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultKeychain
@testable import VaultSystem

/// A fresh vault in a temporary directory with small KDF counts and 4 KiB chunks (so tests that walk
/// every chunk or bit stay fast), plus the file keychain it was created with.
final class TestVault {
    let root: String
    let keychain: Keychain
    let master: SecureBytes
    let phrase: String
    let passphrase = "correct horse battery"
    var path: String { root + "/vault" }

    init(chunkSizeLog2: UInt8 = 12) throws {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        root = "/tmp/vaultaire-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileSystem.makeDirectories(root)
        // The record of clean fan-out directories (ConflictWatch) goes with the test's directory.
        setenv("XDG_CACHE_HOME", root + "/cache", 1)
        keychain = Keychain(backend: FileKeychain(directory: root + "/keychain"))
        var options = VaultAccess.CreateOptions()
        options.iterations = 1000
        options.recoveryIterations = 1000
        options.chunkSizeLog2 = chunkSizeLog2
        let initial = Credential.passphrase(SecureBytes(copying: Array(passphrase.utf8)))
        (phrase, master) = try VaultAccess.create(
            at: root + "/vault", credential: initial, pattern: nil, keychain: keychain,
            options: options, wordlist: try Wordlist.load())
    }

    func credential(_ text: String? = nil) -> Credential {
        .passphrase(SecureBytes(copying: Array((text ?? passphrase).utf8)))
    }

    func open(readOnly: Bool = false) throws -> UnlockedVault {
        let key = try VaultAccess.unwrapMasterKey(at: path, credential: credential(), keychain: keychain)
        return try VaultAccess.open(at: path, master: key, keychain: keychain, readOnly: readOnly)
    }

    deinit { _ = system("rm -rf '\(root)'") }
}

extension UnlockedVault {
    func writeFile(_ path: String, _ data: [UInt8]) throws {
        let (parent, name) = try resolveParent(path)
        let h = try create(in: parent, name: name, permissions: 0o644, caller: .current, exclusive: false)
        defer { release(h) }
        _ = try data.withUnsafeBytes { try write(h, at: 0, from: $0) }
    }

    func readFile(_ path: String) throws -> [UInt8] {
        let node = try resolve(path)
        let h = try open(node.id, write: false)
        defer { release(h) }
        var out = [UInt8](repeating: 0, count: Int(node.size) + 10)
        let n = try out.withUnsafeMutableBytes { try read(h, at: 0, into: $0) }
        return Array(out[0..<n])
    }
}

func randomBytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255) } }
