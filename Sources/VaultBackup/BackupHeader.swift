import VaultCrypto
import VaultFormat

/// The backup header: what a new device needs to get the master key from the passphrase or the
/// recovery phrase alone. Stored on the remote as `keys/<SHA-256 of these bytes>`.
///
///     offset size
///      0      4   magic "VLTB"
///      4      2   backup format version (1)
///      6     24   the vault header's first 24 bytes: "VLTV" | u16 version | vault ID [16] | chunk log2 | 0
///     30      1   credential kind (1 passphrase, 2 pattern)
///     31      1   pattern rows (0 for a passphrase)
///     32      1   pattern columns (0 for a passphrase)
///     33     96   recovery envelope, as in vault.header bytes 99..<195
///    129     64   backup envelope, as in vault.header bytes 195..<259
///    193          end
///
/// The envelopes are copied from `vault.header` unchanged, so their AADs (docs/FORMAT.md) are the vault
/// header's, built from the 24 bytes at offset 6; the backup envelope's key needs no device salt.
/// The credential kind is not covered by an AAD; the object's name (its hash), which the sealed
/// manifest authenticates, covers every byte.
public struct BackupHeader: Equatable {
    public static let magic: [UInt8] = Array("VLTB".utf8)
    public static let encodedSize = 193

    /// The header as bytes: what is uploaded and hashed.
    public let bytes: [UInt8]
    /// The vault header this backup header stands for, with an empty credential envelope.
    public let vaultHeader: VaultHeader

    public var vaultID: [UInt8] { vaultHeader.vaultID }

    /// The backup header of a vault, taken from its `vault.header`.
    public init(of header: VaultHeader) throws {
        let v = header.encoded()
        var w = ByteWriter(capacity: BackupHeader.encodedSize)
        w.raw(BackupHeader.magic)
        w.u16(UInt16(BackupFormat.version))
        w.raw(v[0..<24])
        w.raw(v[24..<27])
        w.raw(v[99..<195])
        w.raw(v[195..<259])
        try self.init(decoding: w.bytes)
    }

    /// Parses a backup header; `unsupportedVersion` for a backup format this build does not read.
    public init(decoding bytes: [UInt8]) throws {
        guard bytes.count >= 6, Array(bytes[0..<4]) == BackupHeader.magic else {
            throw FormatError.malformed("backup header magic")
        }
        let version = Int(bytes[4]) | Int(bytes[5]) << 8
        guard version == BackupFormat.version else { throw BackupFormatError.unsupportedVersion(version) }
        guard bytes.count == BackupHeader.encodedSize else {
            throw FormatError.malformed("backup header size \(bytes.count)")
        }
        // The vault header's layout with a blank credential envelope; its decoder checks the prefix
        // (magic, vault format version, chunk size, reserved byte) and the credential kind.
        var v = ByteWriter(capacity: VaultHeader.encodedSize)
        v.raw(bytes[6..<30])
        v.raw(bytes[30..<33])
        v.raw(bytes[129..<133])  // the credential count: the backup envelope's
        v.raw([UInt8](repeating: 0, count: 8 + 12 + 48))
        v.raw(bytes[33..<129])
        v.raw(bytes[129..<193])
        self.bytes = bytes
        self.vaultHeader = try VaultHeader(decoding: v.bytes)
    }

    /// Opens the backup envelope with the credential (no device salt).
    public func unlock(credential: Credential) throws -> SecureBytes {
        try vaultHeader.unlockWithBackupKey(credential: credential)
    }

    /// Opens the recovery envelope with the normalized recovery phrase.
    public func unlock(recoveryPhrase: SecureBytes) throws -> SecureBytes {
        try vaultHeader.unlock(recoveryPhrase: recoveryPhrase)
    }
}

/// Failures parsing backup objects that are not the vault format's.
public enum BackupFormatError: Error, Equatable {
    /// A backup header or manifest of a backup format version this build does not read.
    case unsupportedVersion(Int)
}
