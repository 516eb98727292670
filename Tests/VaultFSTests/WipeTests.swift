import Glibc
import XCTest
@testable import VaultCrypto
@testable import VaultFS
@testable import VaultFormat
@testable import VaultKeychain
@testable import VaultSystem

/// Proves the wipe: after lock, the master key's bytes (and the index key's) are nowhere in this
/// process's readable memory. The keys are remembered only XOR-masked, so the search itself never
/// puts them back in memory.
final class WipeTests: XCTestCase {
    static let mask: UInt8 = 0x5A

    /// Counts occurrences of the masked 32-byte secret in every readable mapping of this process.
    func occurrences(ofMasked masked: [UInt8]) throws -> Int {
        let maps = String(decoding: try FileSystem.readFile("/proc/self/maps"), as: UTF8.self)
        let mem = try FileDescriptor(path: "/proc/self/mem", flags: O_RDONLY)
        let first = Int32(masked[0] ^ WipeTests.mask)
        var found = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            if line.contains("[vvar]") || line.contains("[vsyscall]") { continue }
            let range = fields[0].split(separator: "-").compactMap { UInt(String($0), radix: 16) }
            guard range.count == 2 else { continue }
            var address = range[0]
            while address < range[1] {
                let length = Int(min(UInt(buffer.count), range[1] - address))
                let n = buffer.withUnsafeMutableBytes { b in pread(mem.rawValue, b.baseAddress, length, off_t(Int64(bitPattern: UInt64(address)))) }
                if n <= 0 { break }
                buffer.withUnsafeBytes { b in
                    var p = b.baseAddress!
                    let end = b.baseAddress! + n
                    while p < end, let hit = memchr(p, first, end - p) {
                        let h = hit.assumingMemoryBound(to: UInt8.self)
                        if end - UnsafeRawPointer(h) >= 32 {
                            var match = true
                            for k in 1..<32 where h[k] ^ WipeTests.mask != masked[k] { match = false; break }
                            if match { found += 1 }
                        }
                        p = UnsafeRawPointer(h) + 1
                    }
                }
                address += UInt(n)
            }
        }
        return found
    }

    func masked(_ secret: SecureBytes) -> [UInt8] { secret.withUnsafeBytes { $0.map { $0 ^ WipeTests.mask } } }

    func testKeysAreNowhereInMemoryAfterLock() throws {
        setenv("VAULTAIRE_ALLOW_WEAK_KDF", "1", 1)
        let root = "/tmp/vaultaire-wipe-\(getpid())"
        defer { _ = system("rm -rf '\(root)'") }
        let keychain = Keychain(backend: FileKeychain(directory: root + "/keychain"))
        var options = VaultAccess.CreateOptions()
        options.iterations = 1000
        options.recoveryIterations = 1000
        let credential = Credential.passphrase(SecureBytes(copying: Array("wipe test passphrase".utf8)))
        do {
            let (_, created) = try VaultAccess.create(at: root + "/vault", credential: credential, pattern: nil, keychain: keychain,
                                                      options: options, wordlist: try Wordlist.load())
            created.wipe()
        }
        var maskedMaster: [UInt8] = []
        var maskedIndexKey: [UInt8] = []
        do {
            let master = try VaultAccess.unwrapMasterKey(at: root + "/vault", credential: credential, keychain: keychain)
            let vault = try VaultAccess.open(at: root + "/vault", master: master, keychain: keychain, readOnly: false)
            maskedMaster = masked(master)
            maskedIndexKey = masked(vault.keys.index)
            let (parent, name) = try vault.resolveParent("/note.txt")
            let h = try vault.create(in: parent, name: name, permissions: 0o600, caller: .current)
            _ = try Array("a note".utf8).withUnsafeBytes { try vault.write(h, at: 0, from: $0) }
            vault.release(h)
            // Positive control: while unlocked the scanner does find the keys.
            XCTAssertGreaterThan(try occurrences(ofMasked: maskedMaster), 0)
            XCTAssertGreaterThan(try occurrences(ofMasked: maskedIndexKey), 0)
            try vault.close()
        }
        let master = try occurrences(ofMasked: maskedMaster)
        let index = try occurrences(ofMasked: maskedIndexKey)
        print("memory scan after lock: master key found \(master) times, index key \(index) times")
        XCTAssertEqual(master, 0)
        XCTAssertEqual(index, 0)
    }
}
