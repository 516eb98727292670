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
///
/// Every file in it is reached through a descriptor of the vault directory (`AnchoredPath`): no
/// symbolic link inside the vault is followed, and every vault file must be a regular file.
public struct VaultLayout {
    public let root: String
    private let anchor: Anchor

    /// The vault directory's descriptor, opened at first use (a new vault's directory is made first).
    private final class Anchor: @unchecked Sendable {
        let root: String
        let lock = Mutex()
        var directory: DirectoryDescriptor?
        init(root: String) { self.root = root }
        func get() throws -> DirectoryDescriptor {
            try lock.withLock {
                if let directory { return directory }
                let opened = try DirectoryDescriptor(path: root)
                directory = opened
                return opened
            }
        }
    }

    public init(root: String) {
        var r = root
        while r.count > 1 && r.hasSuffix("/") { r.removeLast() }
        self.root = r
        self.anchor = Anchor(root: r)
    }

    /// The vault directory itself, by descriptor.
    public func directory() throws -> DirectoryDescriptor { try anchor.get() }

    public func headerFile() throws -> AnchoredPath { try directory().file(VaultHeader.fileName) }
    public func indexDirectory() throws -> AnchoredPath { try directory().file("index") }
    public func lockFile() throws -> AnchoredPath { try directory().file("mount.lock") }
    public func blobFile(_ id: [UInt8]) throws -> AnchoredPath { try directory().file(fannedOut(id, under: "blobs")) }
    public func thumbnailFile(_ id: [UInt8]) throws -> AnchoredPath {
        try directory().file(fannedOut(id, under: "thumbs"))
    }

    /// Full paths, for messages and tests; the program itself opens through the `…File()` accessors.
    public var header: String { root + "/" + VaultHeader.fileName }
    public func blobPath(_ id: [UInt8]) -> String { root + "/" + fannedOut(id, under: "blobs") }
    public func thumbnailPath(_ id: [UInt8]) -> String { root + "/" + fannedOut(id, under: "thumbs") }
    public var blobsDirectory: String { root + "/blobs" }
    public var lockPath: String { root + "/mount.lock" }

    /// `directory/ab/cdef…` for an ID in hex starting ab cd ef. Built byte by byte: it runs on every
    /// file created, opened or removed.
    private func fannedOut(_ id: [UInt8], under directory: String) -> String {
        var path = Array(directory.utf8)
        path.reserveCapacity(path.count + 2 + 2 * id.count)
        path.append(UInt8(ascii: "/"))
        for (i, byte) in id.enumerated() {
            path.append(Hex.digits[Int(byte >> 4)])
            path.append(Hex.digits[Int(byte & 15)])
            if i == 0 { path.append(UInt8(ascii: "/")) }
        }
        return String(decoding: path, as: UTF8.self)
    }

    /// Creates the directory skeleton (0700 throughout), with all 256 fan-out subdirectories for
    /// blobs: made one at a time with their first blob, they cost a new vault's first few thousand
    /// files a `mkdir` each (a third of a create's time). Thumbnails' come with their first one.
    public func createDirectories() throws {
        try FileSystem.makeDirectories(root)
        let dir = try directory()
        for name in ["index", "blobs", "thumbs"] { try dir.file(name).makeDirectory() }
        for first in UInt8.min...UInt8.max { try prepareParent(of: blobFile([first, 0])) }
    }

    /// Makes sure the fan-out directory for `file` exists (vaults made before the fan-out was created
    /// up front get theirs this way).
    public func prepareParent(of file: AnchoredPath) throws {
        try file.parent.makeDirectory()
    }

    /// Reads and decodes the header; `notAVault` when there is none.
    public func readHeader() throws -> VaultHeader {
        guard FileSystem.exists(root) else { throw FormatError.vaultMissing(path: root) }
        guard FileSystem.isDirectory(root) else { throw FormatError.notAVault(path: root) }
        let file = try headerFile()
        guard try file.exists() else { throw FormatError.notAVault(path: root) }
        do { return try VaultHeader(decoding: try file.read(limit: 1 << 16)) } catch FormatError.malformed(let what) {
            throw FormatError.malformed("\(VaultHeader.fileName): \(what)")
        }
    }

    public func writeHeader(_ h: VaultHeader) throws {
        try headerFile().replace(with: h.encoded())
    }

    /// Every blob identifier present on disk.
    public func blobIDsOnDisk() throws -> [[UInt8]] {
        var ids: [[UInt8]] = []
        for sub in try FileSystem.listDirectory(blobsDirectory)
        where sub.count == 2 && FileSystem.isDirectory(blobsDirectory + "/" + sub) {
            for name in try FileSystem.listDirectory(blobsDirectory + "/" + sub) where name.count == 30 {
                if let id = [UInt8](hex: sub + name) { ids.append(id) }
            }
        }
        return ids
    }
}
