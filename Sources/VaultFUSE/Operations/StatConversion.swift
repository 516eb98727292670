internal import CFuse
import Glibc
import VaultFS
import VaultFormat

// An index inode as the kernel's `struct stat` and `fuse_entry_param`.

func timespecFrom(_ ns: Int64) -> timespec {
    var sec = ns / 1_000_000_000
    var nsec = ns % 1_000_000_000
    if nsec < 0 {
        sec -= 1
        nsec += 1_000_000_000
    }
    return timespec(tv_sec: Int(sec), tv_nsec: Int(nsec))
}

func nanoseconds(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }

/// The `S_IF…` bits of a kind of inode.
func typeBits(_ kind: Inode.Kind) -> mode_t {
    switch kind {
    case .file: return S_IFREG
    case .directory: return S_IFDIR
    case .symlink: return S_IFLNK
    case .fifo: return S_IFIFO
    case .socket: return S_IFSOCK
    case .characterDevice: return S_IFCHR
    case .blockDevice: return S_IFBLK
    }
}

func attributes(of node: Inode, _ mounted: MountedVault) -> stat {
    var st = stat()
    st.st_ino = UInt(node.id)
    st.st_mode = typeBits(node.kind) | mode_t(node.permissions)
    st.st_nlink = UInt(node.linkCount)
    st.st_uid = node.uid
    st.st_gid = node.gid
    st.st_rdev = UInt(node.deviceNumber)
    st.st_size = node.kind == .directory ? 4096 : Int(node.size)
    st.st_blksize = mounted.preferredBlockSize
    st.st_blocks = (Int(node.size) + 511) / 512
    st.st_atim = timespecFrom(node.accessTime)
    st.st_mtim = timespecFrom(node.modificationTime)
    st.st_ctim = timespecFrom(node.changeTime)
    return st
}

/// A name's entry for the kernel: the inode and its attributes, both cached for `cacheSeconds`.
func entryParameters(for node: Inode, _ mounted: MountedVault) -> fuse_entry_param {
    var entry = fuse_entry_param()
    entry.ino = node.id
    entry.generation = 0  // inode numbers are never reused within a vault
    entry.attr = attributes(of: node, mounted)
    // The thumbnail repository's entries change behind the kernel's back: never cached.
    let cached = ThumbnailRepository.isVirtual(node.id) ? 0 : MountedVault.cacheSeconds
    entry.attr_timeout = cached
    entry.entry_timeout = cached
    return entry
}

func replyEntry(_ req: FUSERequest, _ node: Inode, _ mounted: MountedVault) {
    var entry = entryParameters(for: node, mounted)
    fuse_reply_entry(req, &entry)
}
