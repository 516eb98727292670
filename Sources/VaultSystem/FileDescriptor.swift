internal import CSystemShims
import Glibc

/// An owned file descriptor, closed on release. Wraps each call once, with EINTR retried.
public final class FileDescriptor: @unchecked Sendable {
    public let rawValue: Int32
    public let path: String

    /// The corresponding C function is `open`.
    public init(path: String, flags: Int32, mode: mode_t = 0o600) throws {
        self.path = path
        self.rawValue = try retryingEINTR("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    /// Takes ownership of `rawValue`, already open (see `AnchoredPath`).
    public init(adopting rawValue: Int32, path: String) {
        self.path = path
        self.rawValue = rawValue
    }

    deinit { _ = Glibc.close(rawValue) }

    /// Reads exactly `count` bytes at `offset` unless the file ends first; returns how many were read.
    /// The corresponding C function is `pread`.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = try retryingEINTR("read", path: path) {
                pread(rawValue, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Up to `count` bytes from `offset`: fewer only where the file ends.
    public func read(count: Int, at offset: Int = 0) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let n = try bytes.withUnsafeMutableBytes { try read(into: $0, at: offset) }
        bytes.removeLast(count - n)
        return bytes
    }

    /// Writes all of `buffer` at `offset`. The corresponding C function is `pwrite`.
    public func write(_ buffer: UnsafeRawBufferPointer, at offset: Int) throws {
        var done = 0
        while done < buffer.count {
            let n = try retryingEINTR("write", path: path) {
                pwrite(rawValue, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            }
            done += n
        }
    }

    public func write(_ bytes: [UInt8], at offset: Int) throws {
        try bytes.withUnsafeBytes { try write($0, at: offset) }
    }

    /// Writes `first` and then `second` back to back from `offset`, with one system call when the
    /// kernel takes both at once. The corresponding C function is `pwritev`.
    public func write(_ first: UnsafeRawBufferPointer, then second: UnsafeRawBufferPointer, at offset: Int) throws {
        var parts = [
            iovec(iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress), iov_len: first.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress), iov_len: second.count),
        ]
        let n = try retryingEINTR("write", path: path) { pwritev(rawValue, &parts, 2, off_t(offset)) }
        guard n < first.count + second.count else { return }
        // A short write (rare for regular files): finish each part with plain pwrites.
        if n < first.count { try write(UnsafeRawBufferPointer(rebasing: first[n...]), at: offset + n) }
        let done = max(0, n - first.count)
        try write(UnsafeRawBufferPointer(rebasing: second[done...]), at: offset + first.count + done)
    }

    /// Appends `bytes` (the descriptor must be open with O_APPEND or positioned at the end).
    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buf in
            var done = 0
            while done < buf.count {
                let n = try retryingEINTR("write", path: path) {
                    Glibc.write(rawValue, buf.baseAddress! + done, buf.count - done)
                }
                done += n
            }
        }
    }

    /// Reads the whole file from offset 0 (to end of file, so /proc files, which report size 0, work too).
    public func readAll(limit: Int = 1 << 30) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: max(try self.size(), 4096))
        var total = 0
        while true {
            let room = out.count - total
            let n = try out.withUnsafeMutableBytes {
                try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[total...]), at: total)
            }
            total += n
            if n < room { break }  // end of file
            guard out.count <= limit else { throw SystemError(errno: EFBIG, operation: "read", path: path) }
            out += [UInt8](repeating: 0, count: out.count)
        }
        guard total <= limit else { throw SystemError(errno: EFBIG, operation: "read", path: path) }
        out.removeLast(out.count - total)
        return out
    }

    public func size() throws -> Int {
        var st = stat()
        try retryingEINTR("fstat", path: path) { fstat(rawValue, &st) }
        return Int(st.st_size)
    }

    /// Which file this is: its device and inode numbers, and how many names it has (0: removed).
    public func identity() throws -> (device: UInt64, inode: UInt64, links: UInt64) {
        var st = stat()
        try retryingEINTR("fstat", path: path) { fstat(rawValue, &st) }
        return (UInt64(st.st_dev), UInt64(st.st_ino), UInt64(st.st_nlink))
    }

    public func isDirectory() throws -> Bool {
        var st = stat()
        try retryingEINTR("fstat", path: path) { fstat(rawValue, &st) }
        return st.st_mode & S_IFMT == S_IFDIR
    }

    public func truncate(to size: Int) throws {
        try retryingEINTR("ftruncate", path: path) { ftruncate(rawValue, off_t(size)) }
    }

    public func sync() throws {
        try retryingEINTR("fsync", path: path) { fsync(rawValue) }
    }

    public func dataSync() throws {
        try retryingEINTR("fdatasync", path: path) { fdatasync(rawValue) }
    }

    /// Starts writing `length` bytes at `offset` (0: to the end of the file) to the disk and, with
    /// `waiting`, waits until they are written (sync_file_range; not a durability promise: metadata
    /// is not covered). A failure is thrown, unlike `startWriteback`'s. A long
    /// writer that calls it as it goes keeps its dirty pages few, so that it does not make other
    /// writers of the system wait for the kernel's writeback.
    public func writeBack(offset: Int, length: Int, waiting: Bool) throws {
        try retryingEINTR("sync_file_range", path: path) {
            vaultaire_write_back(rawValue, Int64(offset), Int64(length), waiting ? 1 : 0)
        }
    }

    /// Reserves host space for `length` bytes at `offset` without changing the file's length
    /// (fallocate with FALLOC_FL_KEEP_SIZE): later writes there cannot fail for want of space.
    /// EOPNOTSUPP where the filesystem cannot.
    public func reserveSpace(offset: Int, length: Int) throws {
        try retryingEINTR("fallocate", path: path) {
            vaultaire_fallocate(rawValue, Int32(VAULTAIRE_FALLOC_KEEP_SIZE), Int64(offset), Int64(length))
        }
    }

    /// Frees the host space of `length` bytes at `offset`, which then read as zeros; the length stays
    /// (fallocate with FALLOC_FL_PUNCH_HOLE). EOPNOTSUPP where the filesystem cannot.
    public func punchHole(offset: Int, length: Int) throws {
        try retryingEINTR("fallocate", path: path) {
            vaultaire_fallocate(
                rawValue, Int32(VAULTAIRE_FALLOC_KEEP_SIZE | VAULTAIRE_FALLOC_PUNCH_HOLE), Int64(offset), Int64(length))
        }
    }

    /// Asks the kernel to start writing `length` bytes at `offset` to disk, without waiting. Streaming
    /// writers call it so that the disk works while they produce the rest, instead of all at the
    /// final fsync. Advisory: a failure here changes nothing, so it is ignored.
    public func startWriteback(offset: Int, length: Int) {
        _ = vaultaire_write_back(rawValue, Int64(offset), Int64(length), 0)
    }
}
