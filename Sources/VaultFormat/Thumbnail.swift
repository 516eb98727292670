import VaultCrypto
import VaultSystem

/// One encrypted thumbnail per file, beside the blob, sealed under the thumbnail key:
///
///     "VLTT" | version u8 | nonce [12] | sealed image
///
/// AAD: "vaultaire.v1.thumbnail" ‖ vault ID ‖ inode ID ‖ blob ID, so a thumbnail cannot be moved to another file.
public enum Thumbnail {
    static let magic: [UInt8] = Array("VLTT".utf8)
    /// The version byte of a sealed thumbnail (the header has its own).
    public static let formatVersion = 1
    public static let maximumSize = 4 << 20

    static func aad(vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array(KeySchedule.thumbnailLabel.utf8))
        w.raw(vaultID)
        w.u64(inodeID)
        w.raw(blobID)
        return w.bytes
    }

    public static func seal(
        _ image: [UInt8], key: SecureBytes, vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]
    ) throws -> [UInt8] {
        guard image.count <= maximumSize else {
            throw FormatError.malformed("thumbnail larger than \(maximumSize) bytes")
        }
        let nonce = try SecureRandom.bytes(12)
        let sealed = try AESGCM.seal(
            image, using: key, nonce: nonce, authenticating: aad(vaultID: vaultID, inodeID: inodeID, blobID: blobID))
        return magic + [UInt8(Thumbnail.formatVersion)] + nonce + sealed
    }

    public static func open(
        _ bytes: [UInt8], key: SecureBytes, vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]
    ) throws -> [UInt8] {
        guard bytes.count >= 5 + 12 + 16, Array(bytes[0..<4]) == magic, bytes[4] == UInt8(Thumbnail.formatVersion)
        else {
            throw FormatError.damaged("thumbnail header")
        }
        do {
            return try AESGCM.open(
                Array(bytes[17...]), using: key, nonce: Array(bytes[5..<17]),
                authenticating: aad(vaultID: vaultID, inodeID: inodeID, blobID: blobID))
        } catch CryptoError.authenticationFailure {
            throw FormatError.damaged("thumbnail fails authentication")
        }
    }
}
