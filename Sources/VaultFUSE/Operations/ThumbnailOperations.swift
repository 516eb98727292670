internal import CFuse
import Glibc
import VaultFS
import VaultFormat

// The `.sh_thumbnails` entries (ThumbnailRepository): what the request handlers do for them.

extension MountedVault {
    /// An inode record, real or the thumbnail repository's.
    func node(_ id: UInt64) throws -> Inode {
        if ThumbnailRepository.isVirtual(id) {
            guard let repository = thumbnailRepository else { throw FSError(ENOENT) }
            return try repository.attributes(id)
        }
        return try vault.attributes(id)
    }

    /// A directory's names and inode numbers: the index's, plus `.sh_thumbnails` where it is shown;
    /// or a virtual directory's.
    func listing(of id: UInt64) throws -> [(name: String, id: UInt64)] {
        if ThumbnailRepository.isVirtual(id) {
            guard let repository = thumbnailRepository else { throw FSError(ENOENT) }
            return try repository.children(of: id)
        }
        let listed = try vault.list(id)
        var entries = listed.map { ($0.name, $0.inode.id) }
        if let repository = thumbnailRepository, ThumbnailRepository.isShown(among: listed) {
            entries.append((ThumbnailRepository.directoryName, repository.id(for: .repository(directory: id))))
        }
        return entries
    }

    /// Refuses changes inside the repository, and to a directory's `.sh_thumbnails` itself.
    func refuseRepository(_ parent: UInt64, _ name: String) throws {
        try refuseVirtual(parent)
        if let repository = thumbnailRepository, name == ThumbnailRepository.directoryName,
            (try? vault.lookup(parent, name)) == nil, repository.isShown(in: parent)
        {
            throw FSError(EROFS)
        }
    }
}

/// Opens an image entry: the PNG is decrypted (and authenticated) now, held by the handle, and read
/// past the kernel's page cache.
func openVirtual(
    _ req: FUSERequest, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>, write: Bool,
    _ mounted: MountedVault
) throws {
    if write { throw FSError(EROFS) }
    guard let repository = mounted.thumbnailRepository else { throw FSError(ENOENT) }
    let handle = Unmanaged.passRetained(VirtualFileHandle(bytes: try repository.contents(of: ino)))
    fi.pointee.direct_io = 1
    fi.pointee.keep_cache = 0
    fi.pointee.fh = UInt64(UInt(bitPattern: handle.toOpaque()))
    if fuse_reply_open(req, fi) != 0 { handle.release() }
}

func readVirtual(_ req: FUSERequest, _ size: Int, _ offset: off_t, _ fi: FUSEFileInfo) throws {
    guard let handle = stored(fi, as: VirtualFileHandle.self)?.takeUnretainedValue() else { throw FSError(EBADF) }
    let bytes = handle.bytes
    let start = min(Int(offset), bytes.count)
    let end = min(start + size, bytes.count)
    _ = bytes.withUnsafeBytes { b in
        fuse_reply_buf(req, b.baseAddress.map { ($0 + start).assumingMemoryBound(to: CChar.self) }, end - start)
    }
}
