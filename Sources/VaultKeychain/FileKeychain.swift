import Glibc
import VaultCrypto
import VaultSystem

/// The file keychain for headless machines: one file per item under
/// `$XDG_DATA_HOME/vaultaire/keychain/` (directory 0700, files 0600, owner and mode checked on every
/// read, atomic replacement). It protects items from other users only; anyone who can read the
/// user's files — root, a backup, a stolen unencrypted disk — can read them. Chosen explicitly, never
/// as a fallback.
public final class FileKeychain: KeychainBackend {
    public let name = "file keychain"
    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// `$XDG_DATA_HOME/vaultaire/keychain`, or `~/.local/share/vaultaire/keychain`.
    public static func defaultDirectory() throws -> String {
        if let xdg = FileSystem.environment("XDG_DATA_HOME") { return xdg + "/vaultaire/keychain" }
        guard let home = FileSystem.environment("HOME") else {
            throw KeychainError.unavailable("neither XDG_DATA_HOME nor HOME is set")
        }
        return home + "/.local/share/vaultaire/keychain"
    }

    private func path(_ item: KeychainItem) -> String { directory + "/" + item.account }

    private func checkPrivate(_ path: String, directory isDir: Bool) throws {
        guard let (mode, uid) = FileSystem.fileMode(path) else { return }
        let kind = mode & S_IFMT
        guard kind == (isDir ? S_IFDIR : S_IFREG) else { throw KeychainError.insecureStorage("\(path) is not a plain \(isDir ? "directory" : "file")") }
        guard uid == getuid() else { throw KeychainError.insecureStorage("\(path) is owned by another user") }
        guard mode & 0o077 == 0 else { throw KeychainError.insecureStorage("\(path) is readable by others (mode \(String(mode & 0o777, radix: 8)))") }
    }

    private func ensureDirectory() throws {
        let old = umask(0o077)
        defer { umask(old) }
        do { try FileSystem.makeDirectories(directory) } catch {
            throw KeychainError.backendFailure("cannot create \(directory): \(error)")
        }
        try checkPrivate(directory, directory: true)
    }

    public func store(_ item: KeychainItem, value: SecureBytes) throws {
        try ensureDirectory()
        let target = path(item)
        let temp = target + ".tmp"
        do {
            let fd = try FileDescriptor(path: temp, flags: O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600)
            try value.withUnsafeBytes { try fd.write($0, at: 0) }
            try fd.sync()
            try retryingEINTR("rename", path: target) { rename(temp, target) }
            try FileSystem.syncDirectory(directory)
        } catch {
            try? FileSystem.remove(temp)
            throw KeychainError.backendFailure("cannot write \(target): \(error)")
        }
    }

    public func get(_ item: KeychainItem) throws -> SecureBytes {
        try checkPrivate(directory, directory: true)
        let p = path(item)
        guard FileSystem.fileMode(p) != nil else { throw KeychainError.notFound }
        try checkPrivate(p, directory: false)
        do {
            let fd = try FileDescriptor(path: p, flags: O_RDONLY | O_NOFOLLOW)
            let size = try fd.size()
            guard size <= 4096 else { throw KeychainError.corruptItem(item.kind) }
            let out = SecureBytes(count: size)
            let n = try out.withUnsafeMutableBytes { try fd.read(into: $0, at: 0) }
            guard n == size else { throw KeychainError.corruptItem(item.kind) }
            return out
        } catch let e as KeychainError {
            throw e
        } catch {
            throw KeychainError.backendFailure("cannot read \(p): \(error)")
        }
    }

    public func delete(_ item: KeychainItem) throws {
        do { try FileSystem.remove(path(item)) } catch {
            throw KeychainError.backendFailure("cannot delete \(path(item)): \(error)")
        }
    }
}
