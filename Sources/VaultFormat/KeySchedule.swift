import VaultCrypto

/// The keys an unlocked vault works with, all derived from the master key by labelled HMAC-SHA512
/// so that no key serves two purposes. Wiped when released (each is `SecureBytes`).
public final class KeySchedule {
    public static let indexLabel = "vaultaire.v1.index"
    public static let headerLabel = "vaultaire.v1.file-header"
    public static let thumbnailLabel = "vaultaire.v1.thumbnail"

    public let master: SecureBytes
    /// Seals the index snapshot and journal.
    public let index: SecureBytes
    /// Seals per-file headers (which carry each file's random content key).
    public let fileHeader: SecureBytes
    /// Seals thumbnails.
    public let thumbnail: SecureBytes

    /// - Throws: `CryptoError` when OpenSSL fails a derivation (never a zero key).
    public init(master: SecureBytes) throws {
        self.master = master
        self.index = try KeyDerivation.subkey(of: master, label: KeySchedule.indexLabel)
        self.fileHeader = try KeyDerivation.subkey(of: master, label: KeySchedule.headerLabel)
        self.thumbnail = try KeyDerivation.subkey(of: master, label: KeySchedule.thumbnailLabel)
    }

    /// Zeroes every key now (lock), without waiting for release.
    public func wipe() {
        master.wipe()
        index.wipe()
        fileHeader.wipe()
        thumbnail.wipe()
    }
}
