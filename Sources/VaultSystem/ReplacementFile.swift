internal import CSystemShims
import Glibc

/// A new file written beside `target` and renamed over it by `commit` once complete and synced.
/// Whoever reads `target` sees the old file or the whole new one, never a part. Where the filesystem
/// allows it the new file has no name until `commit` (O_TMPFILE), so a command killed halfway leaves
/// nothing behind; elsewhere it is a hidden name beside the target, removed if never committed.
public final class ReplacementFile {
    public let descriptor: FileDescriptor
    private let temporaryPath: String
    private let target: String
    private let unnamed: Bool
    private var committed = false

    /// Creates the new file (never following a symlink, never reusing a name). It gets the mode of
    /// the file it replaces, or `mode` when there is none.
    public init(replacing target: String, mode: mode_t = 0o600) throws {
        self.target = target
        let directory = FileSystem.parent(of: target)
        let base = target.split(separator: "/").last.map(String.init) ?? "file"
        temporaryPath = "\(directory)/.\(base).vaultaire-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
        var existing = stat()
        let keptMode = stat(target, &existing) == 0 ? existing.st_mode & 0o7777 : mode
        let fd = vaultaire_open_unnamed(directory, UInt32(keptMode))
        if fd >= 0 {
            descriptor = FileDescriptor(adopting: fd, path: target)
            unnamed = true
        } else {
            descriptor = try FileDescriptor(
                path: temporaryPath, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: keptMode)
            unnamed = false
        }
    }

    /// Syncs the new file and renames it over the target; durable when this returns.
    public func commit() throws {
        try descriptor.sync()
        if unnamed {
            try retryingEINTR("link", path: temporaryPath) {
                vaultaire_name_unnamed(descriptor.rawValue, temporaryPath)
            }
        }
        do {
            try retryingEINTR("rename", path: target) { rename(temporaryPath, target) }
        } catch {
            _ = unlink(temporaryPath)
            throw error
        }
        committed = true
        try FileSystem.syncDirectory(containing: target)
    }

    deinit {
        if !committed && !unnamed { _ = unlink(temporaryPath) }
    }
}
