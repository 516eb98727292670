import Dispatch
import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// The files of a vault directory a snapshot holds: the index (snapshot and journal), every blob and
/// every thumbnail, by their paths inside the vault. Not `vault.header` (the backup header stands in
/// for it), not `mount.lock`, not half-written `*.tmp` files.
enum VaultFiles {
    static func list(_ layout: VaultLayout) throws -> [String] {
        var paths = ["index/snapshot", "index/journal"]
        for top in ["blobs", "thumbs"] {
            let dir = layout.root + "/" + top
            guard FileSystem.isDirectory(dir) else { continue }
            for sub in try FileSystem.listDirectory(dir).sorted() where sub.count == 2 && RemoteContents.isHex(sub) {
                guard FileSystem.isDirectory(dir + "/" + sub) else { continue }
                for name in try FileSystem.listDirectory(dir + "/" + sub).sorted()
                where name.count == 30 && RemoteContents.isHex(name) {
                    paths.append(top + "/" + sub + "/" + name)
                }
            }
        }
        return paths
    }

    struct Hashed {
        var hash: [UInt8]
        var size: UInt64
        /// The file's stamp, when it did not change while it was read (nil: not to be cached).
        var stamp: HashCache.Stamp?
        /// Whether the hash came from the cache (the file was not read).
        var cached = false
    }

    /// SHA-256 and size of each of `paths` (relative to `root`): from `cache` where the file's
    /// stamp is unchanged, else read, on two threads (hashing is the CPU work), each taking the next
    /// file as it finishes one so that a large file does not leave the other thread idle. With
    /// `beginningWriteback`, each file read is also started on its way to disk (see
    /// `FileDescriptor.writeBack`), for a caller that will sync them.
    static func hash(
        _ paths: [String], under root: String, cache: HashCache?, beginningWriteback: Bool = false
    ) throws -> [Hashed] {
        // Storage allocated before the threads start: each slot is written by the one worker that
        // took its index (never the array or the class's properties themselves), read after both end.
        final class Results: @unchecked Sendable {
            let hashed: UnsafeMutableBufferPointer<Hashed?>
            let failures = UnsafeMutableBufferPointer<Error?>.allocate(capacity: 2)
            let next = Guarded(0)
            init(_ n: Int) {
                hashed = .allocate(capacity: n)
                hashed.initialize(repeating: nil)
                failures.initialize(repeating: nil)
            }
            deinit {
                hashed.deinitialize()
                hashed.deallocate()
                failures.deinitialize()
                failures.deallocate()
            }
            /// The next index nobody has taken, or nil when all are taken or a worker failed.
            func take(_ count: Int) -> Int? {
                next.withLock { n in
                    guard n < count else { return nil }
                    n += 1
                    return n - 1
                }
            }
            func stop(_ count: Int) { next.withLock { $0 = count } }
        }
        let results = Results(paths.count)
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            var buffer: [UInt8] = []
            do {
                while let i = results.take(paths.count) {
                    results.hashed[i] = try hash(
                        root + "/" + paths[i], cache: cache, key: paths[i], buffer: &buffer,
                        beginningWriteback: beginningWriteback)
                }
            } catch {
                results.failures[worker] = error
                results.stop(paths.count)
            }
        }
        if let e = results.failures[0] ?? results.failures[1] { throw e }
        return results.hashed.map { $0! }
    }

    /// SHA-256 and size of a file, from `cache` under `key` when its stamp is unchanged, else read in
    /// pieces of up to 1 MiB through `buffer` (reused across files; O_NOFOLLOW: a vault file is never a link).
    static func hash(
        _ path: String, cache: HashCache?, key: String, buffer: inout [UInt8], beginningWriteback: Bool = false
    ) throws -> Hashed {
        let fd = try FileDescriptor(path: path, flags: O_RDONLY | O_NOFOLLOW)
        let before = try stamp(fd)
        if let known = cache?.hash(of: key, stamp: before) {
            return Hashed(hash: known, size: before.size, stamp: before, cached: true)
        }
        let stream = try SHA256Stream()
        if buffer.isEmpty { buffer = [UInt8](repeating: 0, count: 1 << 20) }
        var offset = 0
        while true {
            let n = try buffer.withUnsafeMutableBytes { try fd.read(into: $0, at: offset) }
            if n == 0 { break }
            try buffer.withUnsafeBytes { try stream.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += n
            // A short read at the size the file had is its end: no further read to learn so.
            if n < buffer.count && UInt64(offset) >= before.size { break }
        }
        if beginningWriteback { try fd.writeBack(offset: 0, length: 0, waiting: false) }
        let after = try stamp(fd)
        return Hashed(hash: try stream.finish(), size: UInt64(offset), stamp: after == before ? after : nil)
    }

    private static func stamp(_ fd: FileDescriptor) throws -> HashCache.Stamp {
        var st = stat()
        try retryingEINTR("fstat", path: fd.path) { fstat(fd.rawValue, &st) }
        return HashCache.Stamp(st)
    }
}
