import Glibc
import VaultCrypto
import VaultFormat
import VaultSystem

/// The newest snapshot this device has seen on each remote, per vault, so a remote rolled back to an
/// older snapshot (newer manifests deleted) is noticed. One file per (vault, remote):
/// `$XDG_DATA_HOME/vaultaire/backups/<hex of SHA-256(vault ID ‖ remote)>` (or under
/// `$HOME/.local/share`) holding the snapshot ID in decimal and a newline; directory 0700, file 0600,
/// replaced atomically. Not secret; whoever can write it can lower it, as with the file keychain.
public struct SeenSnapshots {
    let directory: String

    public init() throws {
        if let data = FileSystem.environment("XDG_DATA_HOME") {
            directory = data + "/vaultaire/backups"
        } else if let home = FileSystem.environment("HOME") {
            directory = home + "/.local/share/vaultaire/backups"
        } else {
            throw SystemError(
                errno: ENOENT, operation: "neither XDG_DATA_HOME nor HOME is set for", path: "the backup state")
        }
    }

    func file(vaultID: [UInt8], remote: String) throws -> String {
        directory + "/" + (try SHA256Stream.digest(vaultID + Array(remote.utf8))).hex
    }

    /// The newest snapshot ID seen, or 0 when none.
    public func newest(vaultID: [UInt8], remote: String) throws -> UInt64 {
        let path = try file(vaultID: vaultID, remote: remote)
        guard FileSystem.exists(path) else { return 0 }
        let text = String(decoding: try FileSystem.readFile(path, limit: 64), as: UTF8.self).trimmingWhitespace
        guard let id = UInt64(text) else { throw FormatError.malformed("backup state file \(path)") }
        return id
    }

    /// Raises the recorded ID to `id` (never lowers it).
    public func record(_ id: UInt64, vaultID: [UInt8], remote: String) throws {
        guard id > (try newest(vaultID: vaultID, remote: remote)) else { return }
        let old = umask(0o077)
        defer { umask(old) }
        try FileSystem.makeDirectories(directory)
        let path = try file(vaultID: vaultID, remote: remote)
        let temp = path + ".tmp"
        unlink(temp)
        do {
            let fd = try FileDescriptor(path: temp, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            try fd.write(Array("\(id)\n".utf8), at: 0)
            try fd.sync()
        }
        try retryingEINTR("rename", path: path) { rename(temp, path) }
        try FileSystem.syncDirectory(directory)
    }
}
