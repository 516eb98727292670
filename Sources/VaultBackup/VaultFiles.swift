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

    /// SHA-256 and size of a file, read in pieces of up to 1 MiB through one buffer that callers
    /// reuse across files (O_NOFOLLOW: a vault file is never a link).
    static func hash(_ path: String, buffer: inout [UInt8]) throws -> (hash: [UInt8], size: UInt64) {
        let fd = try FileDescriptor(path: path, flags: O_RDONLY | O_NOFOLLOW)
        let stream = try SHA256Stream()
        if buffer.isEmpty { buffer = [UInt8](repeating: 0, count: 1 << 20) }
        var offset = 0
        while true {
            let n = try buffer.withUnsafeMutableBytes { try fd.read(into: $0, at: offset) }
            if n == 0 { break }
            try buffer.withUnsafeBytes { try stream.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += n
            if n < buffer.count { break }
        }
        return (try stream.finish(), UInt64(offset))
    }
}
