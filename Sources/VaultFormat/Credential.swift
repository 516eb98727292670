import VaultCrypto

/// What a person unlocks with: a passphrase or a pattern on a grid. Both become the same kind of
/// KDF input (`secret`), held in secure storage and wiped when this is released.
public final class Credential {
    public enum Kind: UInt8 {
        case passphrase = 1
        case pattern = 2
    }

    public let kind: Kind
    /// The bytes fed to PBKDF2.
    public let secret: SecureBytes

    private init(kind: Kind, secret: SecureBytes) {
        self.kind = kind
        self.secret = secret
    }

    /// A passphrase, used byte for byte (no normalization: the bytes typed are the bytes derived).
    public static func passphrase(_ bytes: SecureBytes) -> Credential {
        Credential(kind: .passphrase, secret: bytes)
    }

    /// A pattern, in its canonical serialization (see `Pattern.canonicalBytes`).
    public static func pattern(_ pattern: Pattern) -> Credential {
        var bytes = pattern.canonicalBytes
        defer { for i in bytes.indices { bytes[i] = 0 } }
        return Credential(kind: .pattern, secret: SecureBytes(copying: bytes))
    }

    /// Refuses credentials too weak to be worth a KDF: short passphrases and short patterns.
    public func checkStrength() throws {
        switch kind {
        case .passphrase where secret.count < Credential.minimumPassphraseLength:
            throw CredentialError.tooShort("a passphrase needs at least \(Credential.minimumPassphraseLength) bytes")
        default:
            break
        }
    }

    public static let minimumPassphraseLength = 8
}

/// Problems with a credential a person typed.
public enum CredentialError: Error, Equatable, CustomStringConvertible {
    case tooShort(String)
    case invalidPattern(String)
    case mismatch

    public var description: String {
        switch self {
        case .tooShort(let why): return "credential too short: \(why)"
        case .invalidPattern(let why): return "invalid pattern: \(why)"
        case .mismatch: return "the two entries do not match"
        }
    }
}

/// A sequence of distinct cells on a grid, written `a1-b2-c3-d4`: column letter, row number.
public struct Pattern: Equatable {
    public let rows: Int
    public let columns: Int
    /// Cell numbers, row-major (`row * columns + column`), in drawing order.
    public let cells: [Int]

    public static let minimumCells = 4

    public init(rows: Int = 4, columns: Int = 4, cells: [Int]) throws {
        guard Pattern.gridSizes.contains(rows), Pattern.gridSizes.contains(columns) else {
            throw CredentialError.invalidPattern("grid must be 2×2 to 9×9")
        }
        guard cells.count >= Pattern.minimumCells else {
            throw CredentialError.invalidPattern("at least \(Pattern.minimumCells) cells")
        }
        guard Set(cells).count == cells.count else { throw CredentialError.invalidPattern("cells must be distinct") }
        guard cells.allSatisfy({ $0 >= 0 && $0 < rows * columns }) else {
            throw CredentialError.invalidPattern("cell outside the \(columns)×\(rows) grid")
        }
        self.rows = rows
        self.columns = columns
        self.cells = cells
    }

    /// Parses the text form `a1-b2-c3-d4` (case and surrounding spaces ignored). The errors never
    /// repeat any part of the text: it is a credential.
    public init(text: String, rows: Int = 4, columns: Int = 4) throws {
        // Checked before any arithmetic on them: they come from a header nothing has authenticated yet.
        guard Pattern.gridSizes.contains(rows), Pattern.gridSizes.contains(columns) else {
            throw CredentialError.invalidPattern("grid must be 2×2 to 9×9")
        }
        let lastColumn = UInt8(ascii: "a") + UInt8(columns) - 1
        let lastRow = UInt8(ascii: "1") + UInt8(rows) - 1
        var cells: [Int] = []
        for part in text.split(separator: "-") {
            let p = Array(part.trimmingWhitespace.lowercased().utf8)
            guard p.count == 2, (UInt8(ascii: "a")...lastColumn).contains(p[0]),
                (UInt8(ascii: "1")...lastRow).contains(p[1])
            else {
                throw CredentialError.invalidPattern(
                    "the pattern is not a list of cells from a1 to \(Character(UnicodeScalar(lastColumn)))\(Character(UnicodeScalar(lastRow))) joined by '-'"
                )
            }
            cells.append(Int(p[1] - UInt8(ascii: "1")) * columns + Int(p[0] - UInt8(ascii: "a")))
        }
        try self.init(rows: rows, columns: columns, cells: cells)
    }

    /// The grid sizes a pattern may have (rows and columns alike).
    public static let gridSizes = 2...9

    /// The canonical text form.
    public var text: String {
        cells.map { cell in
            "\(Character(UnicodeScalar(UInt8(97 + cell % columns))))\(cell / columns + 1)"
        }.joined(separator: "-")
    }

    /// `"vaultaire-pattern-v1" ‖ rows ‖ columns ‖ count ‖ cells…`, one byte each.
    public var canonicalBytes: [UInt8] {
        Array("vaultaire-pattern-v1".utf8) + [UInt8(rows), UInt8(columns), UInt8(cells.count)] + cells.map { UInt8($0) }
    }
}
