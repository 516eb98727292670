internal import CFuse
import Glibc
import VaultFS
import VaultFormat

/// An open directory: its entries as of the last read from the start (rewinddir sees changes).
final class DirectoryHandle {
    let id: UInt64
    var entries: [(name: String, id: UInt64)] = []
    init(id: UInt64) { self.id = id }
}

/// The directory handle that opendir stored in `fh`.
func directoryHandle(_ fi: FUSEFileInfo) throws -> DirectoryHandle {
    guard let directory = stored(fi, as: DirectoryHandle.self) else { throw FSError(EBADF) }
    return directory.takeUnretainedValue()
}

/// Fills one reply buffer of at most `size` bytes with entries from position `offset` on; positions
/// 0 and 1 are "." and "..", the others the directory's names. With `plus`, each entry carries its
/// attributes, so `ls -l` and `find` need no lookup per name.
func readDirectory(
    _ req: FUSERequest, _ size: Int, _ offset: off_t, _ fi: FUSEFileInfo,
    plus: Bool, _ mounted: MountedVault
) throws {
    let directory = try directoryHandle(fi)
    if offset == 0 { directory.entries = try mounted.listing(of: directory.id) }
    let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
    defer { buffer.deallocate() }
    var used = 0
    var position = Int(offset)
    while position < directory.entries.count + 2 {
        let name: String
        let id: UInt64
        var entry = fuse_entry_param()
        if position < 2 {
            name = position == 0 ? "." : ".."
            id = directory.id
            entry.attr.st_ino = UInt(id)
            entry.attr.st_mode = S_IFDIR  // ino 0: the kernel links no inode for "." and ".."
        } else {
            (name, id) = directory.entries[position - 2]
            guard let node = try? mounted.node(id) else {
                position += 1
                continue
            }  // removed since
            if plus {
                entry = entryParameters(for: node, mounted)
            } else {
                entry.attr.st_ino = UInt(id)
                entry.attr.st_mode = typeBits(node.kind)
            }
        }
        let added = name.withCString { cName in
            plus
                ? fuse_add_direntry_plus(req, buffer + used, size - used, cName, &entry, off_t(position + 1))
                : fuse_add_direntry(req, buffer + used, size - used, cName, &entry.attr, off_t(position + 1))
        }
        if added > size - used { break }
        used += added
        position += 1
    }
    fuse_reply_buf(req, buffer, used)
}
