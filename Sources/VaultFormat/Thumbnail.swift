import VaultCrypto
import VaultSystem

/// The thumbnails of one file, as made from one version of its contents.
public struct ThumbnailSet: Equatable, Sendable {
    /// The file's content version and size when the thumbnails were made (nil for version 1 files,
    /// which did not record them): a file whose record says otherwise has stale thumbnails.
    public var contentVersion: UInt64?
    public var fileSize: UInt64?
    /// PNG, longest side at most 128 px (the freedesktop "normal" size).
    public var normal: [UInt8]
    /// PNG, longest side at most 256 px ("large").
    public var large: [UInt8]

    public init(contentVersion: UInt64?, fileSize: UInt64?, normal: [UInt8], large: [UInt8]) {
        self.contentVersion = contentVersion
        self.fileSize = fileSize
        self.normal = normal
        self.large = large
    }

    /// Whether these were made from the contents `node` describes.
    public func isCurrent(contentVersion: UInt64, size: UInt64) -> Bool {
        self.contentVersion == contentVersion && fileSize == size
    }
}

/// One encrypted thumbnail file per regular file, beside the blob (`thumbs/XX/…`, named like it):
///
///     "VLTT" | version u8 | nonce [12] | sealed payload (ciphertext ‖ 16-byte tag)
///
/// Version 1 (read only): key = thumbnail key; AAD = "vaultaire.v1.thumbnail" ‖ vault ID ‖ u64 inode ID ‖
/// blob ID; payload = one image.
///
/// Version 2 (written): key = the first 32 bytes of HMAC-SHA512(thumbnail key, "vaultaire.v2.thumbnail" ‖
/// blob ID), one key per file, so a key's seal count (random 96-bit nonces) is the number of times that
/// one file's thumbnails were rewritten; AAD = "vaultaire.v2.thumbnail" ‖ vault ID ‖ u64 inode ID ‖
/// blob ID ‖ "VLTT" ‖ u8 2; payload = u64 content version ‖ u64 file size ‖ u32 length ‖ normal PNG ‖
/// u32 length ‖ large PNG (integers little-endian). A thumbnail file cannot be moved to another file,
/// and one made from older contents is told apart by the recorded content version and size.
public enum Thumbnail {
    static let magic: [UInt8] = Array("VLTT".utf8)
    /// The version byte of a sealed thumbnail file written now (the header has its own).
    public static let formatVersion = 2
    public static let v2Label = "vaultaire.v2.thumbnail"
    /// The largest thumbnail file accepted (both images together).
    public static let maximumSize = 4 << 20

    static func aadV1(vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array(KeySchedule.thumbnailLabel.utf8))
        w.raw(vaultID)
        w.u64(inodeID)
        w.raw(blobID)
        return w.bytes
    }

    static func aadV2(vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array(v2Label.utf8))
        w.raw(vaultID)
        w.u64(inodeID)
        w.raw(blobID)
        w.raw(magic)
        w.u8(2)
        return w.bytes
    }

    /// The per-file key of version 2.
    public static func fileKey(thumbnailKey: SecureBytes, blobID: [UInt8]) throws -> SecureBytes {
        let mac = try Digest.hmacSHA512(key: thumbnailKey, message: Array(v2Label.utf8) + blobID)
        defer { mac.wipe() }
        return mac.slice(0..<32)
    }

    /// Seals both sizes as a version 2 file.
    public static func seal(
        _ set: ThumbnailSet, key: SecureBytes, vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]
    ) throws -> [UInt8] {
        guard set.normal.count + set.large.count + 32 <= maximumSize else {
            throw FormatError.malformed("thumbnails larger than \(maximumSize) bytes")
        }
        var payload = ByteWriter()
        payload.u64(set.contentVersion ?? 0)
        payload.u64(set.fileSize ?? 0)
        payload.blob(set.normal)
        payload.blob(set.large)
        let fileKey = try fileKey(thumbnailKey: key, blobID: blobID)
        defer { fileKey.wipe() }
        let nonce = try SecureRandom.bytes(12)
        let sealed = try AESGCM.seal(
            payload.bytes, using: fileKey, nonce: nonce,
            authenticating: aadV2(vaultID: vaultID, inodeID: inodeID, blobID: blobID))
        return magic + [2] + nonce + sealed
    }

    /// Seals one image as a version 1 file (kept for tests of the reader and for fixtures).
    public static func sealV1(
        _ image: [UInt8], key: SecureBytes, vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]
    ) throws -> [UInt8] {
        guard image.count <= maximumSize else {
            throw FormatError.malformed("thumbnail larger than \(maximumSize) bytes")
        }
        let nonce = try SecureRandom.bytes(12)
        let sealed = try AESGCM.seal(
            image, using: key, nonce: nonce, authenticating: aadV1(vaultID: vaultID, inodeID: inodeID, blobID: blobID))
        return magic + [1] + nonce + sealed
    }

    /// The plaintext of a version 2 file, once authenticated (public for the fuzz target).
    public static func decodePayload(_ payload: [UInt8]) throws -> ThumbnailSet {
        var r = ByteReader(payload, what: "thumbnail")
        let version = try r.u64()
        let size = try r.u64()
        let normal = try r.blob(limit: maximumSize)
        let large = try r.blob(limit: maximumSize)
        try r.expectEnd()
        return ThumbnailSet(contentVersion: version, fileSize: size, normal: normal, large: large)
    }

    /// Authenticates and opens a version 1 or 2 file. A version 1 image stands for both sizes.
    public static func open(
        _ bytes: [UInt8], key: SecureBytes, vaultID: [UInt8], inodeID: UInt64, blobID: [UInt8]
    ) throws -> ThumbnailSet {
        guard bytes.count >= 5 + 12 + 16, Array(bytes[0..<4]) == magic else {
            throw FormatError.damaged("thumbnail header")
        }
        let nonce = Array(bytes[5..<17])
        let sealed = Array(bytes[17...])
        switch bytes[4] {
        case 1:
            do {
                let image = try AESGCM.open(
                    sealed, using: key, nonce: nonce,
                    authenticating: aadV1(vaultID: vaultID, inodeID: inodeID, blobID: blobID))
                return ThumbnailSet(contentVersion: nil, fileSize: nil, normal: image, large: image)
            } catch CryptoError.authenticationFailure {
                throw FormatError.damaged("thumbnail fails authentication")
            }
        case 2:
            let fileKey = try fileKey(thumbnailKey: key, blobID: blobID)
            defer { fileKey.wipe() }
            let payload: [UInt8]
            do {
                payload = try AESGCM.open(
                    sealed, using: fileKey, nonce: nonce,
                    authenticating: aadV2(vaultID: vaultID, inodeID: inodeID, blobID: blobID))
            } catch CryptoError.authenticationFailure {
                throw FormatError.damaged("thumbnail fails authentication")
            }
            return try decodePayload(payload)
        default:
            throw FormatError.damaged("thumbnail version \(bytes[4])")
        }
    }
}
