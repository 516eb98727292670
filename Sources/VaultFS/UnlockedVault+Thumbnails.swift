import Glibc
import VaultFormat
import VaultSystem

/// Sealed thumbnails of regular files (stored beside the blobs, keyed by blob ID).
extension UnlockedVault {
    public func setThumbnail(_ id: UInt64, image: [UInt8]) throws {
        try requireWritable()
        let node = try attributes(id)
        guard node.kind == .file else { throw FSError(EINVAL) }
        let sealed = try Thumbnail.seal(
            image, key: keys.thumbnail, vaultID: header.vaultID, inodeID: id, blobID: node.blobID)
        let file = try layout.thumbnailFile(node.blobID)
        try layout.prepareParent(of: file)
        try file.replace(with: sealed)
    }

    public func thumbnail(_ id: UInt64) throws -> [UInt8]? {
        let node = try attributes(id)
        guard node.kind == .file else { return nil }
        let file = try layout.thumbnailFile(node.blobID)
        guard try file.exists() else { return nil }
        return try Thumbnail.open(
            try file.read(limit: Thumbnail.maximumSize + 64), key: keys.thumbnail,
            vaultID: header.vaultID, inodeID: id, blobID: node.blobID)
    }
}
