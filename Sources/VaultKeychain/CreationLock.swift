import Glibc
import VaultSystem

/// An exclusive flock(2) shared by all of this user's Vaultaire processes, held around a keychain
/// read-or-create. The lock file lives in `$XDG_RUNTIME_DIR/vaultaire/` (private to the user, gone at
/// logout), or else in `$XDG_DATA_HOME/vaultaire/`; it is reached through no symbolic link.
enum CreationLock {
    static func directory() throws -> String {
        if let runtime = FileSystem.environment("XDG_RUNTIME_DIR") { return runtime + "/vaultaire" }
        return FileSystem.parent(of: try FileKeychain.defaultDirectory())
    }

    /// Runs `body` while holding the lock.
    static func holding<R>(_ body: () throws -> R) throws -> R {
        let fd: FileDescriptor
        do {
            let path = try directory()
            let old = umask(0o077)
            defer { umask(old) }
            try FileSystem.makeDirectories(path)
            fd = try DirectoryDescriptor(path: path).file("keychain-create.lock").open(flags: O_RDWR | O_CREAT)
            try retryingEINTR("flock", path: fd.path) { flock(fd.rawValue, LOCK_EX) }
        } catch let e as KeychainError {
            throw e
        } catch {
            throw KeychainError.backendFailure("cannot take the keychain's creation lock: \(error)")
        }
        defer { flock(fd.rawValue, LOCK_UN) }
        return try body()
    }
}
