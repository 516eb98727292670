import VaultSystem

/// Where each piece of a vault lives inside the vault directory. Names reveal nothing: blobs are named by
/// random 128-bit identifiers, fanned out over 256 subdirectories.
///
///     VAULT/vault.header      public parameters and key envelopes
///     VAULT/index/snapshot    sealed index snapshot
///     VAULT/index/journal     sealed index journal
///     VAULT/blobs/ab/cdef…    file contents (one blob per regular file)
///     VAULT/thumbs/ab/cdef…   optional thumbnails
///     VAULT/mount.lock        present while a process has the vault open for writing
public struct VaultLayout {
    public let root: String

    public init(root: String) {
        var r = root
        while r.count > 1 && r.hasSuffix("/") { r.removeLast() }
        self.root = r
    }

    public var header: String { root + "/" + VaultHeader.fileName }
    public var indexDirectory: String { root + "/index" }
    public var blobsDirectory: String { root + "/blobs" }
    public var thumbsDirectory: String { root + "/thumbs" }
    public var lockFile: String { root + "/mount.lock" }

    public func blobPath(_ id: [UInt8]) -> String {
        let h = id.hex
        return blobsDirectory + "/" + h.prefix(2) + "/" + h.dropFirst(2)
    }

    public func thumbnailPath(_ id: [UInt8]) -> String {
        let h = id.hex
        return thumbsDirectory + "/" + h.prefix(2) + "/" + h.dropFirst(2)
    }

    /// Creates the directory skeleton (0700 throughout); fan-out subdirectories come with their first blob.
    public func createDirectories() throws {
        try FileSystem.makeDirectories(root)
        for dir in [indexDirectory, blobsDirectory, thumbsDirectory] { try FileSystem.makeDirectory(dir) }
    }

    /// Makes sure the fan-out directory for `path` exists.
    public func prepareParent(of path: String) throws {
        try FileSystem.makeDirectory(FileSystem.parent(of: path))
    }

    /// Reads and decodes the header; `notAVault` when there is none.
    public func readHeader() throws -> VaultHeader {
        guard FileSystem.exists(header) else { throw FormatError.notAVault(path: root) }
        return try VaultHeader(decoding: try FileSystem.readFile(header, limit: 1 << 16))
    }

    public func writeHeader(_ h: VaultHeader) throws {
        try FileSystem.replaceFile(header, with: h.encoded())
    }

    /// Every blob identifier present on disk.
    public func blobIDsOnDisk() throws -> [[UInt8]] {
        var ids: [[UInt8]] = []
        for sub in try FileSystem.listDirectory(blobsDirectory) where sub.count == 2 && FileSystem.isDirectory(blobsDirectory + "/" + sub) {
            for name in try FileSystem.listDirectory(blobsDirectory + "/" + sub) where name.count == 30 {
                if let id = [UInt8](hex: sub + name) { ids.append(id) }
            }
        }
        return ids
    }
}
