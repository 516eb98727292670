import Glibc
import XCTest

@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultKeychain
@testable import VaultSystem

/// Proves the wipe: after lock, no key of the vault — master, index, file-header, thumbnail, the
/// content key of every file, closed or still held open — and not the recovery phrase's entropy is
/// anywhere in this process's readable memory (issue 22, finding 5). The keys are remembered only
/// XOR-masked (`MemoryScan`), so the search itself never puts them back in memory.
final class WipeTests: XCTestCase {
    var root = ""
    var keychain: Keychain!
    let credential = Credential.passphrase(SecureBytes(copying: Array("wipe test passphrase".utf8)))

    override func setUpWithError() throws {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        root = "/tmp/vaultaire-wipe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        keychain = Keychain(backend: FileKeychain(directory: root + "/keychain"))
    }

    override func tearDown() { _ = system("rm -rf '\(root)'") }

    /// Creates the vault; returns its recovery phrase.
    func createVault() throws -> String {
        var options = VaultAccess.CreateOptions()
        options.iterations = 1000
        options.recoveryIterations = 1000
        let (phrase, created) = try VaultAccess.create(
            at: root + "/vault", credential: credential, pattern: nil, keychain: keychain,
            options: options, wordlist: try Wordlist.load())
        created.wipe()
        return phrase
    }

    func count(_ secrets: [MemoryScan.Masked]) throws -> [String: Int] {
        let counts = try MemoryScan.occurrences(of: secrets)
        return Dictionary(uniqueKeysWithValues: zip(secrets.map(\.label), counts))
    }

    func testKeysAreNowhereInMemoryAfterCloseAndLock() throws {
        _ = try createVault()
        var secrets: [MemoryScan.Masked] = []
        var closedFileKey: MemoryScan.Masked!
        do {
            let master = try VaultAccess.unwrapMasterKey(
                at: root + "/vault", credential: credential, keychain: keychain)
            let vault = try VaultAccess.open(at: root + "/vault", master: master, keychain: keychain, readOnly: false)
            // A file written and closed: its header was sealed (with its content key) at create and
            // at the first write of the session.
            let (parent, name) = try vault.resolveParent("/closed.txt")
            let closed = try vault.create(in: parent, name: name, permissions: 0o600, caller: .current)
            _ = try Array("a closed note".utf8).withUnsafeBytes { try vault.write(closed, at: 0, from: $0) }
            closedFileKey = closed.file.blob.maskedContentKey(label: "content key of the closed file")
            vault.release(closed)
            // A file still held open when the vault locks, as the kernel holds handles after a lazy
            // unmount: its OpenFile outlives the lock.
            let (p2, n2) = try vault.resolveParent("/held.txt")
            let held = try vault.create(in: p2, name: n2, permissions: 0o600, caller: .current)
            _ = try Array("a held note".utf8).withUnsafeBytes { try vault.write(held, at: 0, from: $0) }
            try vault.fsync(held)
            secrets = vault.maskedKeysForScan()
            XCTAssertEqual(
                secrets.count, 6, "four vault keys, the clean-directory record's key and the held file's content key")
            // Once another file's chunk has been sealed, the closed file's key is gone from memory.
            XCTAssertEqual(
                try count([closedFileKey])[closedFileKey.label], 0, "a closed file's content key survived its close")
            // Positive control: while unlocked the scanner does find each key.
            for (label, n) in try count(secrets) { XCTAssertGreaterThan(n, 0, "\(label) not found while unlocked") }
            try vault.close()
            // The handle is still held: a write through it now fails instead of sealing under a wiped key.
            XCTAssertThrowsError(try Array("too late".utf8).withUnsafeBytes { try vault.write(held, at: 0, from: $0) })
            let after = try count(secrets + [closedFileKey])
            print("memory scan after lock: \(after)")
            for (label, n) in after { XCTAssertEqual(n, 0, "\(label) is still in memory after lock") }
            vault.release(held)
        }
    }

    /// Sealing a file's header copies its content key into the header's plaintext; that copy is wiped,
    /// so right after a reseal the key's own secure storage is the only place that holds it.
    func testSealingAHeaderLeavesNoCopyOfTheContentKey() throws {
        _ = try createVault()
        let master = try VaultAccess.unwrapMasterKey(at: root + "/vault", credential: credential, keychain: keychain)
        let vault = try VaultAccess.open(at: root + "/vault", master: master, keychain: keychain, readOnly: false)
        try vault.writeFile("/f", Array("some content".utf8))
        try vault.close()  // wipes `master` too
        let reopened = try VaultAccess.unwrapMasterKey(at: root + "/vault", credential: credential, keychain: keychain)
        let again = try VaultAccess.open(at: root + "/vault", master: reopened, keychain: keychain, readOnly: false)
        let node = try again.resolve("/f")
        for round in 0..<3 {
            // The first writable open of a session reseals the header (a new content version); a
            // rename reseals it again.
            let h = try again.open(node.id, write: true)
            let key = h.file.blob.maskedContentKey(label: "content key")
            if round > 0 {
                try again.rename(from: Inode.rootID, name: "f\(round - 1)", to: Inode.rootID, newName: "f\(round)")
            } else {
                try again.rename(from: Inode.rootID, name: "f", to: Inode.rootID, newName: "f0")
            }
            XCTAssertEqual(
                try count([key])["content key"], 1, "round \(round): a copy of the content key besides its own storage")
            again.release(h)
        }
        try again.close()
    }

    func testTheRecoveryEntropyIsNowhereInMemoryAfterCreate() throws {
        let phrase = try createVault()
        // The entropy the phrase encodes, built already masked (the real bytes never exist here).
        let list = try Wordlist.load()
        var masked = MemoryScan.masked(zeros: 32)
        for (w, word) in phrase.split(separator: " ").enumerated() {
            let index = try XCTUnwrap(list.index[String(word)])
            for b in 0..<11 where index >> (10 - b) & 1 == 1 {
                let bit = w * 11 + b
                if bit < 256 { masked[bit / 8] ^= 1 << (7 - UInt8(bit % 8)) }
            }
        }
        let entropy = MemoryScan.Masked(label: "recovery entropy", maskedBytes: masked)
        XCTAssertEqual(
            try count([entropy])["recovery entropy"], 0, "the recovery entropy is still in memory after create")
        // Positive control: validating the phrase again puts the entropy in a buffer that is wiped on
        // return — the scan must find nothing then too, but would find this unwiped copy.
        var copy = masked.map { $0 ^ MemoryScan.mask }
        XCTAssertGreaterThan(try count([entropy])["recovery entropy"] ?? 0, 0, "the scanner finds an unwiped copy")
        SecureBytes.cleanse(&copy)
        _ = try RecoveryPhrase.validate(phrase, words: list)
        XCTAssertEqual(try count([entropy])["recovery entropy"], 0, "validate left the entropy behind")
    }
}
