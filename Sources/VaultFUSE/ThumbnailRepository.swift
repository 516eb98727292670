import Glibc
import VaultCrypto
import VaultFS
import VaultFormat
import VaultSystem
import VaultThumbnails

/// The freedesktop Thumbnail Managing Standard's shared thumbnail repository, served read-only in
/// every directory of the mount that holds images: `DIR/.sh_thumbnails/normal/` and `…/large/`, with
/// one `MD5(file name).png` per file that has thumbnails, decrypted on read and carrying the
/// standard's `Thumb::URI` (the file name, as the standard asks of shared repositories), `Thumb::MTime`
/// and `Thumb::Size` text chunks. A file manager that honours shared repositories (Thunar with
/// tumbler) shows these and writes no plaintext thumbnail of its own to `~/.cache/thumbnails`.
///
/// Nothing of it is in the index: its entries get inode numbers from `firstID` on, far above any the
/// index hands out (`UnlockedVault.nextInodeID`), one per (directory, size, file, name), kept for the
/// mount's life (the kernel may ask for any it was told of). Its answers change without a request of
/// the kernel's to this mount (a thumbnail appears in the background), so the kernel caches none of
/// them: entries and attributes with timeout 0, file contents with direct I/O.
final class ThumbnailRepository: @unchecked Sendable {
    static let directoryName = ".sh_thumbnails"
    static let firstID: UInt64 = 1 << 62

    enum Node: Hashable {
        case repository(directory: UInt64)
        case size(directory: UInt64, large: Bool)
        case image(directory: UInt64, large: Bool, file: UInt64, name: String)
    }

    let vault: UnlockedVault
    private let lock = Mutex()
    private var idsByNode: [Node: UInt64] = [:]
    private var nodes: [UInt64: Node] = [:]
    private var nextID = ThumbnailRepository.firstID

    init(vault: UnlockedVault) { self.vault = vault }

    static func isVirtual(_ id: UInt64) -> Bool { id >= firstID }

    func id(for node: Node) -> UInt64 {
        lock.withLock {
            if let id = idsByNode[node] { return id }
            let id = nextID
            nextID += 1
            idsByNode[node] = id
            nodes[id] = node
            return id
        }
    }

    func node(_ id: UInt64) throws -> Node {
        guard let node = lock.withLock({ nodes[id] }) else { throw FSError(ENOENT) }
        return node
    }

    /// Whether the real directory `directory` shows the repository: it has no entry of that name of
    /// its own and holds a file whose type (by name) is an image.
    func isShown(in directory: UInt64) -> Bool {
        guard let entries = try? vault.list(directory) else { return false }
        return ThumbnailRepository.isShown(among: entries)
    }

    static func isShown(among entries: [(name: String, inode: Inode)]) -> Bool {
        if entries.contains(where: { $0.name == ThumbnailRepository.directoryName }) { return false }
        return entries.contains { $0.inode.kind == .file && $0.inode.mimeType.hasPrefix("image/") }
    }

    static func fileName(forThumbnailOf name: String) -> String {
        ((try? Digest.md5(Array(name.utf8)))?.hex ?? "") + ".png"
    }

    /// The names in a virtual directory.
    func children(of id: UInt64) throws -> [(name: String, id: UInt64)] {
        switch try node(id) {
        case .repository(let directory):
            return [
                ("large", self.id(for: .size(directory: directory, large: true))),
                ("normal", self.id(for: .size(directory: directory, large: false))),
            ]
        case .size(let directory, let large):
            return try vault.list(directory).filter { hasThumbnails($0.inode) }.map {
                (
                    ThumbnailRepository.fileName(forThumbnailOf: $0.name),
                    self.id(for: .image(directory: directory, large: large, file: $0.inode.id, name: $0.name))
                )
            }
        case .image: throw FSError(ENOTDIR)
        }
    }

    func lookup(_ parent: UInt64, _ name: String) throws -> UInt64 {
        switch try node(parent) {
        case .repository(let directory):
            guard name == "normal" || name == "large" else { throw FSError(ENOENT) }
            return id(for: .size(directory: directory, large: name == "large"))
        case .size(let directory, let large):
            guard name.hasSuffix(".png"), name.utf8.count == 36 else { throw FSError(ENOENT) }
            for (child, inode) in try vault.list(directory)
            where ThumbnailRepository.fileName(forThumbnailOf: child) == name && hasThumbnails(inode) {
                return id(for: .image(directory: directory, large: large, file: inode.id, name: child))
            }
            throw FSError(ENOENT)
        case .image: throw FSError(ENOTDIR)
        }
    }

    private func hasThumbnails(_ node: Inode) -> Bool {
        guard node.kind == .file, !node.blobID.isEmpty, let file = try? vault.layout.thumbnailFile(node.blobID) else {
            return false
        }
        return (try? file.exists()) ?? false
    }

    /// The PNG an image entry serves: the decrypted thumbnail with the standard's text chunks. A
    /// thumbnail that fails authentication is EIO (never shown); one made from other contents than the
    /// file's now, or a file renamed or removed since, is ENOENT.
    func contents(of id: UInt64) throws -> [UInt8] {
        guard case .image(let directory, let large, let file, let name) = try node(id) else { throw FSError(EISDIR) }
        let inode = try vault.lookup(directory, name)
        guard inode.id == file else { throw FSError(ENOENT) }
        let set: ThumbnailSet
        do {
            guard let found = try vault.thumbnails(file) else { throw FSError(ENOENT) }
            set = found
        } catch let FormatError.damaged(why) {
            throw FSError(EIO, "thumbnail of \(vault.path(of: file) ?? name): \(why)")
        } catch let e as FormatError {
            throw FSError(EIO, "thumbnail of \(vault.path(of: file) ?? name): \(e)")
        }
        if set.contentVersion != nil && !set.isCurrent(contentVersion: inode.contentVersion, size: inode.size) {
            throw FSError(ENOENT)
        }
        let texts: [(key: String, value: String)] = [
            ("Thumb::URI", ThumbnailRepository.uriPart(name)),
            ("Thumb::MTime", String(inode.modificationTime / 1_000_000_000)),
            ("Thumb::Size", String(inode.size)),
            ("Software", "Vaultaire"),
        ]
        guard let png = PNGText.inserting(texts, into: large ? set.large : set.normal) else {
            throw FSError(EIO, "thumbnail of \(vault.path(of: file) ?? name) is not a PNG")
        }
        return png
    }

    /// A file name as the single path segment of a URI (RFC 3986: unreserved bytes as they are, the
    /// rest percent-encoded).
    static func uriPart(_ name: String) -> String {
        var out = ""
        for b in name.utf8 {
            let c = Character(UnicodeScalar(b))
            if (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "-._~".contains(c) {
                out.append(c)
            } else {
                out += "%" + String(b, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// The attributes of a virtual entry, as an inode record: owned like the directory it belongs to,
    /// read-only, its times the directory's (an image entry's those of its file).
    func attributes(_ id: UInt64) throws -> Inode {
        let node = try node(id)
        let directory: UInt64
        switch node {
        case .repository(let d), .size(let d, _), .image(let d, _, _, _): directory = d
        }
        let owner = try vault.attributes(directory)
        var inode: Inode
        switch node {
        case .repository, .size:
            inode = Inode(id: id, kind: .directory, permissions: 0o555, uid: owner.uid, gid: owner.gid, now: 0)
            inode.linkCount = 2
            inode.accessTime = owner.accessTime
            inode.modificationTime = owner.modificationTime
            inode.changeTime = owner.changeTime
        case .image(_, _, let file, _):
            let original = try vault.attributes(file)
            inode = Inode(id: id, kind: .file, permissions: 0o444, uid: original.uid, gid: original.gid, now: 0)
            inode.size = UInt64(try contents(of: id).count)
            inode.accessTime = original.accessTime
            inode.modificationTime = original.modificationTime
            inode.changeTime = original.changeTime
        }
        return inode
    }
}

/// An open `.sh_thumbnails` image: the PNG as it was at open.
final class VirtualFileHandle {
    let bytes: [UInt8]
    init(bytes: [UInt8]) { self.bytes = bytes }
}

/// Changes to the repository's entries (or of entries into it) are refused: it is read-only.
func refuseVirtual(_ ids: UInt64...) throws {
    if ids.contains(where: ThumbnailRepository.isVirtual) { throw FSError(EROFS) }
}

extension String {
    fileprivate func leftPadded(to n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
