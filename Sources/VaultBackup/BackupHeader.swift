import VaultCrypto
import VaultFormat

/// The backup header: what a new device needs to get the master key from the passphrase or the
/// recovery phrase alone. Stored on the remote as `keys/<SHA-256 of these bytes>`.
///
///     offset size
///      0      4   magic "VLTB"
///      4      2   backup format version (1)
///      6     24   the envelope prefix: "VLTV" | u16 1 | vault ID [16] | chunk log2 | 0
///     30      1   credential kind (1 passphrase, 2 pattern)
///     31      1   pattern rows (0 for a passphrase)
///     32      1   pattern columns (0 for a passphrase)
///     33     96   recovery envelope, as vault.header stores it
///    129     64   backup envelope: iterations u32 | nonce [12] | sealed [48]
///    193          end
///
/// The recovery envelope is copied from `vault.header` unchanged; the backup envelope is made at backup
/// time from the credential (the vault keeps none since format version 2). Both AADs are built from
/// the envelope prefix at offset 6 (docs/FORMAT.md); the backup envelope's key needs no device salt.
/// The credential kind is not covered by an AAD; the object's name (its hash), which the sealed
/// manifest authenticates, covers every byte.
public struct BackupHeader: Equatable {
    public static let magic: [UInt8] = Array("VLTB".utf8)
    public static let encodedSize = 193

    /// The header as bytes: what is uploaded and hashed.
    public let bytes: [UInt8]
    /// The envelopes as a version-1 vault header with an empty credential envelope (its slot).
    public let vaultHeader: VaultHeader

    public var vaultID: [UInt8] { vaultHeader.vaultID }

    /// The backup header of a vault: its recovery envelope, and a backup envelope made for the
    /// credential of `slot` (the one the owner typed).
    public init(of header: VaultHeader, slot: VaultHeader.DeviceSlot, backup: VaultHeader.BackupEnvelope) throws {
        var w = ByteWriter(capacity: BackupHeader.encodedSize)
        w.raw(BackupHeader.magic)
        w.u16(UInt16(BackupFormat.version))
        w.raw(header.envelopePrefix)
        w.u8(slot.kind.rawValue)
        w.u8(slot.patternRows)
        w.u8(slot.patternColumns)
        w.raw(header.recoveryBytes)
        w.u32(backup.iterations)
        w.raw(backup.nonce)
        w.raw(backup.sealed)
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
        // A version-1 vault header's layout with a blank credential envelope; its decoder checks the
        // prefix (magic, version 1, chunk size, reserved byte), the credential kind and the counts.
        guard bytes[10] == 1, bytes[11] == 0 else { throw FormatError.malformed("backup header envelope prefix") }
        var v = ByteWriter(capacity: VaultHeader.version1Size)
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
        guard let envelope = vaultHeader.legacyBackup else { preconditionFailure("decoded with a backup envelope") }
        return try vaultHeader.unlock(backup: envelope, credential: credential)
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
