import Glibc
import VaultSystem

/// `mount.lock` in the vault directory: held (flock) by the one process that has the vault open for
/// writing. The kernel drops a flock when its holder dies, so a lock left by a killed process never
/// blocks for ever; the leftover file then only earns a notice.
final class VaultLock {
    private let fd: FileDescriptor
    let path: String
    private(set) var staleNotice: String?

    private init(fd: FileDescriptor, path: String) {
        self.fd = fd
        self.path = path
    }

    static func acquire(_ path: String) throws -> VaultLock {
        let fd = try FileDescriptor(path: path, flags: O_RDWR | O_CREAT, mode: 0o600)
        if flock(fd.rawValue, LOCK_EX | LOCK_NB) != 0 {
            let holder = String(decoding: (try? fd.readAll(limit: 64)) ?? [], as: UTF8.self)
                .trimmingCharacters(in: " \n")
            throw FSError(EBUSY, "the vault is already open by process \(holder.isEmpty ? "?" : holder)")
        }
        let lock = VaultLock(fd: fd, path: path)
        let previous = String(decoding: (try? fd.readAll(limit: 64)) ?? [], as: UTF8.self).trimmingCharacters(in: " \n")
        if !previous.isEmpty {
            lock.staleNotice = "a lock left by process \(previous), which is gone, was cleared"
        }
        try fd.truncate(to: 0)
        try fd.write(Array("\(getpid())\n".utf8), at: 0)
        return lock
    }

    deinit {
        try? fd.truncate(to: 0)
        unlink(path)
        flock(fd.rawValue, LOCK_UN)
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}
