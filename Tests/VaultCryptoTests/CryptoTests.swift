import Foundation
import XCTest

@testable import VaultCrypto

/// Reads `key = value` blocks separated by blank lines; `#` lines are comments.
func loadVectors(_ name: String) throws -> [[String: String]] {
    let url = try XCTUnwrap(Bundle.module.url(forResource: "Vectors/" + name, withExtension: nil))
    let text = try String(contentsOf: url, encoding: .utf8)
    var blocks: [[String: String]] = []
    var current: [String: String] = [:]
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        let l = line.trimmingCharacters(in: .whitespaces)
        if l.hasPrefix("#") { continue }
        if l.isEmpty {
            if !current.isEmpty {
                blocks.append(current)
                current = [:]
            }
            continue
        }
        let parts = l.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
        current[parts[0]] = parts.count > 1 ? parts[1] : ""
    }
    if !current.isEmpty { blocks.append(current) }
    return blocks
}

func unhex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex {
        let j = s.index(i, offsetBy: 2)
        out.append(UInt8(s[i..<j], radix: 16)!)
        i = j
    }
    return out
}

final class AESGCMTests: XCTestCase {
    func testPublishedVectors() throws {
        let cases = try loadVectors("gcm-aes256.txt")
        XCTAssertEqual(cases.count, 4)
        for c in cases {
            let key = SecureBytes(copying: unhex(c["key"]!))
            let sealed = try AESGCM.seal(
                unhex(c["plaintext"]!), using: key, nonce: unhex(c["iv"]!), authenticating: unhex(c["aad"]!))
            XCTAssertEqual(sealed, unhex(c["ciphertext"]!) + unhex(c["tag"]!))
            let opened = try AESGCM.open(sealed, using: key, nonce: unhex(c["iv"]!), authenticating: unhex(c["aad"]!))
            XCTAssertEqual(opened, unhex(c["plaintext"]!))
        }
    }

    func testEveryBitFlipInCiphertextTagAADOrNonceFails() throws {
        let key = try SecureBytes(randomCount: 32)
        let nonce = try SecureRandom.bytes(12)
        let aad = Array("header".utf8)
        let plaintext = Array("attack at dawn, bring snacks".utf8)
        let sealed = try AESGCM.seal(plaintext, using: key, nonce: nonce, authenticating: aad)
        func assertRejected(
            _ s: [UInt8], _ n: [UInt8], _ a: [UInt8], file: StaticString = #filePath, line: UInt = #line
        ) {
            XCTAssertThrowsError(try AESGCM.open(s, using: key, nonce: n, authenticating: a), file: file, line: line) {
                XCTAssertEqual($0 as? CryptoError, .authenticationFailure)
            }
        }
        for bit in 0..<(sealed.count * 8) {
            var s = sealed
            s[bit / 8] ^= 1 << (bit % 8)
            assertRejected(s, nonce, aad)
        }
        for bit in 0..<(aad.count * 8) {
            var a = aad
            a[bit / 8] ^= 1 << (bit % 8)
            assertRejected(sealed, nonce, a)
        }
        for bit in 0..<(nonce.count * 8) {
            var n = nonce
            n[bit / 8] ^= 1 << (bit % 8)
            assertRejected(sealed, n, aad)
        }
        assertRejected(Array(sealed.dropLast()), nonce, aad)
        XCTAssertThrowsError(
            try AESGCM.open(sealed, using: try SecureBytes(randomCount: 32), nonce: nonce, authenticating: aad))
    }

    func testFailedOpenZeroesTheOutputBuffer() throws {
        let key = try SecureBytes(randomCount: 32)
        let nonce = try SecureRandom.bytes(12)
        var sealed = try AESGCM.seal([UInt8](repeating: 0x41, count: 64), using: key, nonce: nonce)
        sealed[70] ^= 1  // corrupt the tag
        var out = [UInt8](repeating: 0xEE, count: 64)
        XCTAssertThrowsError(
            try sealed.withUnsafeBytes { s in
                try nonce.withUnsafeBytes { n in
                    try out.withUnsafeMutableBytes { o in
                        try AESGCMContext.current.open(
                            s, using: key, nonce: n, authenticating: UnsafeRawBufferPointer(start: nil, count: 0),
                            into: o)
                    }
                }
            })
        XCTAssertEqual(out, [UInt8](repeating: 0, count: 64), "no unauthenticated plaintext may remain in the buffer")
    }

    /// The per-thread context keeps the last key loaded; interleaving keys, directions and a wipe must
    /// give exactly the published vectors every time (a stale key would show up as a wrong ciphertext).
    func testReusedContextFollowsKeyChangesDirectionsAndWipes() throws {
        let cases = try loadVectors("gcm-aes256.txt")
        let other = try SecureBytes(randomCount: 32)
        for round in 0..<3 {
            for c in cases {
                let key = SecureBytes(copying: unhex(c["key"]!))
                let sealed = try AESGCM.seal(
                    unhex(c["plaintext"]!), using: key, nonce: unhex(c["iv"]!), authenticating: unhex(c["aad"]!))
                XCTAssertEqual(sealed, unhex(c["ciphertext"]!) + unhex(c["tag"]!), "round \(round)")
                // Another key in between.
                _ = try AESGCM.seal([1, 2, 3], using: other, nonce: [UInt8](repeating: 7, count: 12))
                XCTAssertEqual(
                    try AESGCM.open(sealed, using: key, nonce: unhex(c["iv"]!), authenticating: unhex(c["aad"]!)),
                    unhex(c["plaintext"]!))
                XCTAssertEqual(
                    try AESGCM.seal(
                        unhex(c["plaintext"]!), using: key, nonce: unhex(c["iv"]!), authenticating: unhex(c["aad"]!)),
                    sealed)
                if round == 1 { AESGCMContext.wipeAll() }
            }
        }
    }

    func testWrongLengthsAreRefused() {
        XCTAssertThrowsError(
            try AESGCM.seal([1], using: SecureBytes(count: 16), nonce: [UInt8](repeating: 0, count: 12)))
        XCTAssertThrowsError(
            try AESGCM.seal([1], using: SecureBytes(count: 32), nonce: [UInt8](repeating: 0, count: 8)))
    }
}

final class PBKDF2Tests: XCTestCase {
    func testPublishedVectors() throws {
        let cases = try loadVectors("pbkdf2-sha512.txt")
        XCTAssertEqual(cases.count, 3)
        for c in cases {
            let dk = unhex(c["dk"]!)
            let out = try PBKDF2.deriveSHA512(
                password: SecureBytes(copying: Array(c["password"]!.utf8)),
                salt: Array(c["salt"]!.utf8), iterations: Int(c["iterations"]!)!, length: dk.count)
            XCTAssertTrue(out.constantTimeEquals(dk))
        }
    }
}

final class SecureBytesTests: XCTestCase {
    func testDescriptionsRedactTheContents() throws {
        let secret = SecureBytes(copying: Array("hunter2-hunter2".utf8))
        for text in [secret.description, secret.debugDescription, "\(secret)", String(reflecting: secret)] {
            XCTAssertFalse(text.contains("hunter2"))
            XCTAssertTrue(text.contains("redacted"))
        }
    }

    func testEqualityIsByContentAndWipeZeroes() throws {
        let a = SecureBytes(copying: [1, 2, 3, 4])
        let b = SecureBytes(copying: [1, 2, 3, 4])
        let c = SecureBytes(copying: [1, 2, 3, 5])
        XCTAssertEqual(a, b)
        XCTAssertNotEqual(a, c)
        XCTAssertFalse(a.constantTimeEquals(SecureBytes(copying: [1, 2, 3])))
        a.wipe()
        XCTAssertTrue(a.constantTimeEquals([0, 0, 0, 0]))
    }

    /// Locked memory in use by this process, from /proc/self/status (kB).
    private func lockedKilobytes() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmLck:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    /// Keys share locked pages (5,000 keys in well under a megabyte of locked memory, not a page
    /// each), each in its own slot, and a reused slot starts zeroed.
    func testSmallSecretsShareLockedPagesAndComeBackZeroed() throws {
        let before = try lockedKilobytes()
        var keys = try (0..<5000).map { _ in try SecureBytes(randomCount: 32) }
        let grew = try lockedKilobytes() - before
        XCTAssertGreaterThanOrEqual(before, 0)
        XCTAssertLessThan(grew, 1024, "5,000 keys locked \(grew) kB (a page each would be 20,000 kB)")
        if geteuid() == 0 { XCTAssertTrue(keys.allSatisfy(\.isLocked)) }
        let starts = keys.map { key in key.withUnsafeBytes { UInt(bitPattern: $0.baseAddress!) } }.sorted()
        for (a, b) in zip(starts, starts.dropFirst()) { XCTAssertGreaterThanOrEqual(b - a, 32, "two keys overlap") }
        XCTAssertEqual(Set(keys.map { $0.withUnsafeBytes { Array($0) } }).count, 5000)
        keys.removeLast(2500)
        for _ in 0..<2500 {
            let fresh = SecureBytes(count: 32)
            XCTAssertTrue(fresh.constantTimeEquals([UInt8](repeating: 0, count: 32)), "a reused slot kept old bytes")
        }
        let large = try SecureBytes(randomCount: 4096)
        if geteuid() == 0 { XCTAssertTrue(large.isLocked) }
        XCTAssertEqual(keys.count, 2500)
    }

    func testRandomKeysAndNoncesDiffer() throws {
        var seen = Set<[UInt8]>()
        for _ in 0..<1000 { seen.insert(try SecureRandom.bytes(12)) }
        XCTAssertEqual(seen.count, 1000)
        XCTAssertNotEqual(try SecureBytes(randomCount: 32), try SecureBytes(randomCount: 32))
    }

    func testSubkeysAreSeparatedByLabel() throws {
        let master = try SecureBytes(randomCount: 32)
        let a = try KeyDerivation.subkey(of: master, label: "a")
        XCTAssertEqual(a.count, 32)
        XCTAssertNotEqual(a, try KeyDerivation.subkey(of: master, label: "b"))
        XCTAssertEqual(a, try KeyDerivation.subkey(of: master, label: "a"))
    }
}
