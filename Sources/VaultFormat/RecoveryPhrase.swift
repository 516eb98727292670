import Foundation
import VaultCrypto

/// The 24-word recovery phrase: 256 random bits plus an 8-bit SHA-256 checksum, 11 bits a word,
/// from the BIP-39 English list (2048 words). Only its normalized text reaches the KDF.
///
/// The phrase passes through Swift `String`s, which this code cannot wipe; the normalized bytes
/// handed to the KDF are secure storage.
public enum RecoveryPhrase {
    public static let wordCount = 24

    /// A fresh random phrase.
    public static func generate(words list: Wordlist) throws -> String {
        // Entropy and checksum in one array of its final size: no temporary copy (a concatenation
        // or a growing append would leave one behind, unwiped).
        var bits = [UInt8](repeating: 0, count: 33)
        defer { SecureBytes.cleanse(&bits) }
        try bits.withUnsafeMutableBytes { try SecureRandom.fill(UnsafeMutableRawBufferPointer(rebasing: $0[0..<32])) }
        let checksum = try bits.withUnsafeBytes { try Digest.sha256(UnsafeRawBufferPointer(rebasing: $0[0..<32])) }[0]
        bits[32] = checksum
        var words: [String] = []
        for w in 0..<wordCount {
            var index = 0
            for b in 0..<11 {
                let bit = w * 11 + b
                index = index << 1 | Int(bits[bit / 8] >> (7 - UInt8(bit % 8)) & 1)
            }
            words.append(list.words[index])
        }
        return words.joined(separator: " ")
    }

    /// NFKD, lower case, words separated by single spaces.
    public static func normalize(_ phrase: String) -> String {
        phrase.decomposedStringWithCompatibilityMapping.lowercased()
            .split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
    }

    /// Checks words and checksum; returns the normalized phrase as KDF input.
    public static func validate(_ phrase: String, words list: Wordlist) throws -> SecureBytes {
        let normalized = normalize(phrase)
        let words = normalized.split(separator: " ")
        guard words.count == wordCount else {
            throw RecoveryPhraseError.wrongWordCount(words.count)
        }
        var bits = [UInt8](repeating: 0, count: 33)
        defer { SecureBytes.cleanse(&bits) }
        for (w, word) in words.enumerated() {
            guard let index = list.index[String(word)] else { throw RecoveryPhraseError.unknownWord(position: w + 1) }
            for b in 0..<11 where index >> (10 - b) & 1 == 1 {
                let bit = w * 11 + b
                bits[bit / 8] |= 1 << (7 - UInt8(bit % 8))
            }
        }
        let checksum = try bits.withUnsafeBytes { try Digest.sha256(UnsafeRawBufferPointer(rebasing: $0[0..<32])) }[0]
        guard checksum == bits[32] else { throw RecoveryPhraseError.badChecksum }
        return SecureBytes(copying: Array(normalized.utf8))
    }
}

/// Problems with a typed recovery phrase; none repeats the phrase.
public enum RecoveryPhraseError: Error, Equatable, CustomStringConvertible {
    case wrongWordCount(Int)
    case unknownWord(position: Int)
    case badChecksum

    public var description: String {
        switch self {
        case .wrongWordCount(let n): return "a recovery phrase has \(RecoveryPhrase.wordCount) words, this one has \(n)"
        case .unknownWord(let position): return "word \(position) of the recovery phrase is not in the word list"
        case .badChecksum: return "the recovery phrase checksum does not match (a word is wrong or out of order)"
        }
    }
}

/// The BIP-39 English word list, read from Debian's python3-mnemonic and checked against its hash,
/// so a changed list can never silently produce phrases that open nothing.
public struct Wordlist {
    public let words: [String]
    public let index: [String: Int]

    public static let defaultPath = "/usr/lib/python3/dist-packages/mnemonic/wordlist/english.txt"
    public static let sha256 = "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda"

    public static func load(path: String = FileSystemPaths.wordlist) throws -> Wordlist {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw WordlistError.missing(path)
        }
        guard try Digest.sha256(Array(data)).hex == sha256 else { throw WordlistError.altered(path) }
        let words = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        guard words.count == 2048 else { throw WordlistError.altered(path) }
        var index: [String: Int] = [:]
        for (i, w) in words.enumerated() { index[w] = i }
        return Wordlist(words: words, index: index)
    }
}

public enum WordlistError: Error, CustomStringConvertible {
    case missing(String)
    case altered(String)

    public var description: String {
        switch self {
        case .missing(let p):
            return "recovery word list not found at \(p) (install python3-mnemonic, see scripts/install-deps.sh)"
        case .altered(let p): return "recovery word list at \(p) is not the BIP-39 English list"
        }
    }
}

public enum FileSystemPaths {
    public static var wordlist: String {
        ProcessInfo.processInfo.environment["VAULTAIRE_WORDLIST"] ?? Wordlist.defaultPath
    }
}
