import Glibc
import VaultCrypto
import VaultSystem

/// The file keychain for headless machines: one file per item under
/// `$XDG_DATA_HOME/vaultaire/keychain/` (directory 0700, files 0600, owner and mode checked on every
/// read, atomic replacement). It protects items from other users only; anyone who can read the
/// user's files — root, a backup, a stolen unencrypted disk — can read them. Chosen explicitly, never
/// as a fallback.
///
/// Items are reached through a descriptor of the directory, never through a symbolic link, and are
/// opened before they are checked (no check-then-open race). Temporaries have names of their own per
/// writer, created O_EXCL; the device salt is created first-writer-wins (link(2)).
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

    /// Owner and mode of an open item or of the directory: ours, and nothing for group or others.
    private func checkPrivate(_ fd: FileDescriptor, directory isDir: Bool) throws {
        var st = stat()
        try retryingEINTR("fstat", path: fd.path) { fstat(fd.rawValue, &st) }
        guard st.st_mode & S_IFMT == (isDir ? S_IFDIR : S_IFREG) else {
            throw KeychainError.insecureStorage("\(fd.path) is not a plain \(isDir ? "directory" : "file")")
        }
        guard st.st_uid == getuid() else { throw KeychainError.insecureStorage("\(fd.path) is owned by another user") }
        guard st.st_mode & 0o077 == 0 else {
            throw KeychainError.insecureStorage(
                "\(fd.path) is readable by others (mode \(String(st.st_mode & 0o777, radix: 8)))")
        }
    }

    /// The keychain directory, opened (not followed if it is a link) and checked.
    private func openDirectory(creating: Bool) throws -> DirectoryDescriptor {
        if creating {
            let old = umask(0o077)
            defer { umask(old) }
            do { try FileSystem.makeDirectories(directory) } catch {
                throw KeychainError.backendFailure("cannot create \(directory): \(error)")
            }
        }
        if let (mode, _) = FileSystem.fileMode(directory), mode & S_IFMT != S_IFDIR {
            throw KeychainError.insecureStorage("\(directory) is not a plain directory")
        }
        let dir: DirectoryDescriptor
        do { dir = try DirectoryDescriptor(path: directory) } catch let e as SystemError where e.errno == ENOENT {
            throw KeychainError.notFound
        }
        try checkPrivate(try dir.file("").openDirectory(), directory: true)
        return dir
    }

    /// A temporary name no other writer uses: concurrent stores never share (or rename away) one.
    private func temporaryName(for item: KeychainItem) throws -> String {
        item.account + "." + (try SecureRandom.bytes(8)).map { String($0, radix: 16) }.joined() + ".tmp"
    }

    private func write(_ value: SecureBytes, to fd: FileDescriptor) throws {
        try value.withUnsafeBytes { try fd.write($0, at: 0) }
    }

    public func store(_ item: KeychainItem, value: SecureBytes) throws {
        let dir = try openDirectory(creating: true)
        let target = dir.file(item.account)
        do {
            try target.replace(temporaryName: try temporaryName(for: item)) { try write(value, to: $0) }
        } catch let e as UnsafeFileError {
            throw e
        } catch {
            throw KeychainError.backendFailure("cannot write \(target.path): \(error)")
        }
    }

    /// Creates the item unless it exists: the value is written to a temporary of this writer's own
    /// and linked to the item's name, which fails if another writer got there first. Returns the value
    /// the keychain holds afterwards — the winner's.
    public func createIfAbsent(_ item: KeychainItem, value: SecureBytes) throws -> SecureBytes {
        let dir = try openDirectory(creating: true)
        let target = dir.file(item.account)
        let temporary = dir.file(try temporaryName(for: item))
        do {
            defer { try? temporary.remove() }
            let fd = try temporary.createExclusive()
            try write(value, to: fd)
            try fd.sync()
            do {
                try target.link(from: temporary)
            } catch let e as SystemError where e.errno == EEXIST {
                return try get(item)  // another writer was first
            }
            try target.parent.sync()
            return value
        } catch let e as KeychainError {
            throw e
        } catch let e as UnsafeFileError {
            throw e
        } catch {
            throw KeychainError.backendFailure("cannot create \(target.path): \(error)")
        }
    }

    public func get(_ item: KeychainItem) throws -> SecureBytes {
        let dir = try openDirectory(creating: false)
        let file = dir.file(item.account)
        do {
            let fd: FileDescriptor
            do { fd = try file.open(flags: O_RDONLY) } catch let e as SystemError where e.errno == ENOENT {
                throw KeychainError.notFound
            }
            try checkPrivate(fd, directory: false)
            let size = try fd.size()
            guard size <= 4096 else { throw KeychainError.corruptItem(item.kind) }
            let out = SecureBytes(count: size)
            let n = try out.withUnsafeMutableBytes { try fd.read(into: $0, at: 0) }
            guard n == size else { throw KeychainError.corruptItem(item.kind) }
            return out
        } catch let e as KeychainError {
            throw e
        } catch let e as UnsafeFileError {
            throw e
        } catch {
            throw KeychainError.backendFailure("cannot read \(file.path): \(error)")
        }
    }

    public func delete(_ item: KeychainItem) throws {
        let dir: DirectoryDescriptor
        do { dir = try openDirectory(creating: false) } catch KeychainError.notFound { return }
        do { try dir.file(item.account).remove() } catch {
            throw KeychainError.backendFailure("cannot delete \(directory)/\(item.account): \(error)")
        }
    }
}
