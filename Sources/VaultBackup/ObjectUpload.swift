import Glibc
import VaultSystem

/// A snapshot's vault files hashed and the objects the remote lacks uploaded, at once: a helper
/// thread hashes the files a group at a time and stages a symbolic link for each missing object
/// (named by its hash); each time enough is staged it hands the names on, and the calling thread
/// uploads them with rclone while hashing goes on. One rclone runs at a time, so the remote sees
/// what one `rclone copy` would do; each run takes every name staged since the last one began.
/// The first failure — a file that cannot be read, an upload refused — stops both, and is thrown.
enum ObjectUpload {
    /// What the snapshot holds, and what was sent.
    struct Outcome {
        var entries: [Manifest.Entry] = []
        /// Hashes the next backup may trust (see `HashCache.isSettled`).
        var fresh: [String: HashCache.Entry] = [:]
        var filesRead = 0
        var objectsUploaded = 0
        var bytesUploaded: UInt64 = 0
        var objectsPresent = 0
    }

    /// Names staged for one upload, and how far hashing had come when they were handed on.
    struct Staged: Sendable {
        var names: [String]
        var filesHashed: Int
    }

    /// Files hashed at a time (on two threads), by count or by bytes: few enough that the staged
    /// names are looked at often, so that the first upload starts early even among large files.
    static let groupFiles = 64
    static let groupBytes: UInt64 = 16 << 20
    /// What is staged before it is handed on (whichever comes first): big enough that rclone's start
    /// (some 60 ms) is small beside the upload, small enough that the first upload starts early.
    static let batchBytes: UInt64 = 64 << 20
    static let batchObjects = 1000

    /// Hashes `paths` (relative to `root`) and uploads the objects `present` (object → size on the
    /// remote) lacks, with `extra` (staged already, e.g. the backup header) in the first upload.
    static func run(
        _ paths: [String], under root: String, cache: HashCache, started: Int64, present: [String: UInt64],
        extra: [String], staging: Staging, rclone: Rclone, status: (String) -> Void
    ) throws -> Outcome {
        let upload = staging.path + "/upload"
        var runs = 0
        let (outcome, _) = try Pipeline.run(
            callingThread: .uses,
            make: { send in
                try hashAndStage(
                    paths, under: root, cache: cache, started: started, present: present, extra: extra,
                    staging: staging, send: send)
            },
            use: { receive in
                while let ready = receive() {
                    runs += 1
                    let names = ready.flatMap(\.names)
                    status(
                        "uploading \(names.count) objects (\(ready.last!.filesHashed) of \(paths.count) vault files read)"
                    )
                    // rclone reads the vault's files through the links while the caller holds the writers' lock.
                    try rclone.upload(from: upload, listFile: try staging.writeList("upload-\(runs).list", names))
                }
            })
        return outcome
    }

    /// The helper thread's part: hashes, builds the manifest's entries, stages links and sends them
    /// in batches; returns early (with what it has) when `send` says the pipeline has stopped.
    private static func hashAndStage(
        _ paths: [String], under root: String, cache: HashCache, started: Int64, present: [String: UInt64],
        extra: [String], staging: Staging, send: (Staged) -> Bool
    ) throws -> Outcome {
        var outcome = Outcome()
        var pending = extra
        var pendingBytes: UInt64 = 0
        var staged = Set<String>()
        for range in groups(paths, under: root) {
            let group = Array(paths[range])
            let hashed = try VaultFiles.hash(group, under: root, cache: cache)
            for (p, file) in zip(group, hashed) {
                if !file.cached { outcome.filesRead += 1 }
                if let stamp = file.stamp, HashCache.isSettled(stamp, started: started) {
                    outcome.fresh[p] = HashCache.Entry(stamp: stamp, hash: file.hash)
                }
                outcome.entries.append(Manifest.Entry(path: p, size: file.size, hash: file.hash))
                let object = BackupFormat.objectPath(file.hash)
                // Present only whole: an object of another size is what an interrupted upload left, and is
                // replaced (its name fixes its only right content).
                if present[object] == file.size {
                    outcome.objectsPresent += 1
                    continue
                }
                guard staged.insert(object).inserted else { continue }
                try staging.link("upload/" + object, to: root + "/" + p)
                pending.append(object)
                pendingBytes += file.size
                outcome.objectsUploaded += 1
                outcome.bytesUploaded += file.size
            }
            if pendingBytes >= batchBytes || pending.count >= batchObjects {
                guard send(Staged(names: pending, filesHashed: range.upperBound)) else { return outcome }
                (pending, pendingBytes) = ([], 0)
            }
        }
        if !pending.isEmpty { _ = send(Staged(names: pending, filesHashed: paths.count)) }
        return outcome
    }

    /// `paths` cut into groups of at most `groupFiles` files or about `groupBytes` bytes, by the sizes
    /// the files have now (one that changes or vanishes only moves a boundary; hashing finds it).
    static func groups(_ paths: [String], under root: String) -> [Range<Int>] {
        var groups: [Range<Int>] = []
        var start = 0
        var bytes: UInt64 = 0
        for (i, p) in paths.enumerated() {
            var st = stat()
            if lstat(root + "/" + p, &st) == 0 { bytes += UInt64(st.st_size) }
            if bytes >= groupBytes || i + 1 - start >= groupFiles {
                groups.append(start..<(i + 1))
                (start, bytes) = (i + 1, 0)
            }
        }
        if start < paths.count { groups.append(start..<paths.count) }
        return groups
    }
}
