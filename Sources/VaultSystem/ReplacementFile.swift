import Glibc

/// A new file written beside `target` and renamed over it by `commit` once complete and synced; removed
/// if never committed. Whoever reads `target` sees the old file or the whole new one, never a part.
public final class ReplacementFile {
    public let descriptor: FileDescriptor
    private let temporaryPath: String
    private let target: String
    private var committed = false

    /// Creates the temporary file (never following a symlink, never reusing a name). It gets the mode
    /// of the file it replaces, or `mode` when there is none.
    public init(replacing target: String, mode: mode_t = 0o600) throws {
        self.target = target
        let directory = FileSystem.parent(of: target)
        let base = target.split(separator: "/").last.map(String.init) ?? "file"
        temporaryPath = "\(directory)/.\(base).vaultaire-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
        var existing = stat()
        let keptMode = stat(target, &existing) == 0 ? existing.st_mode & 0o7777 : mode
        descriptor = try FileDescriptor(path: temporaryPath, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: keptMode)
    }

    /// Syncs the new file and renames it over the target; durable when this returns.
    public func commit() throws {
        try descriptor.sync()
        try retryingEINTR("rename", path: target) { rename(temporaryPath, target) }
        committed = true
        try FileSystem.syncDirectory(containing: target)
    }

    deinit {
        if !committed { _ = unlink(temporaryPath) }
    }
}
