import Glibc
import VaultSystem

/// A snapshot's objects fetched in batches and each batch checked while the next downloads: the
/// calling thread runs rclone (one at a time) and shows progress; a helper thread checks every
/// object of a downloaded batch against the authenticated manifest — there, of its size, of its
/// hash — and hands the batch's entries to the caller to place. The first failure stops both, and
/// is thrown: nothing is placed that has not passed its check.
///
/// rclone's own post-copy checksum is skipped (`--ignore-checksum`): the SHA-256 against the
/// authenticated manifest is the check that counts, and rclone's costs a second read of every object
/// on the local backend. So that a transfer corrupted on its way is not reported as damage, an object
/// that is missing or fails its hash is fetched once more, alone and with rclone's checksum, after the
/// batches; only one that fails again is damage. Entries naming it wait for that second fetch.
enum ObjectDownload {
    /// One rclone run: the objects it fetches, and the manifest entries they complete, in the order
    /// fetched (`fetchOrder`; an entry whose object came in an earlier batch goes with the batch that
    /// names it).
    struct Batch {
        var objects: [String] = []
        var entries: [Manifest.Entry] = []
        var bytes: UInt64 = 0
    }

    /// The first batch is small, so that checking starts early; each next one is twice as large, up to
    /// the largest, so that rclone is started (some 60 ms each) only a few times.
    static let firstBatchBytes: UInt64 = 32 << 20
    static let largestBatchBytes: UInt64 = 256 << 20
    static let firstBatchObjects = 250
    static let largestBatchObjects = 4000

    /// The order entries are fetched in: the index first, then each blob with its thumbnail (which
    /// bears the blob's name) beside it, so that a restore can check a file's chunks as soon as the
    /// batch holding it is placed. (The manifest sorts by path: the index after every blob, the
    /// thumbnails after it.)
    static func fetchOrder(_ entries: [Manifest.Entry]) -> [Manifest.Entry] {
        // Each key made once: 10,000 entries take some 140,000 comparisons.
        let keyed = entries.map { e -> (first: Bool, name: Substring, entry: Manifest.Entry) in
            guard let slash = e.path.firstIndex(of: "/") else { return (false, Substring(e.path), e) }
            return (e.path.hasPrefix("index/"), e.path[e.path.index(after: slash)...], e)
        }
        return keyed.sorted { a, b in
            if a.first != b.first { return a.first }
            if a.name != b.name { return a.name < b.name }
            return a.entry.path < b.entry.path
        }.map(\.entry)
    }

    /// `manifest`'s entries cut into batches (in `fetchOrder`), each object fetched once.
    static func batches(_ manifest: Manifest) -> [Batch] {
        var batches: [Batch] = []
        var current = Batch()
        var seen = Set<String>()
        for e in fetchOrder(manifest.entries) {
            let object = BackupFormat.objectPath(e.hash)
            current.entries.append(e)
            guard seen.insert(object).inserted else { continue }
            current.objects.append(object)
            current.bytes += e.size
            // Doubled four times at most: the largest is reached, and a shift never overflows.
            let doublings = min(batches.count, 4)
            if current.bytes >= min(firstBatchBytes << doublings, largestBatchBytes)
                || current.objects.count >= min(firstBatchObjects << doublings, largestBatchObjects)
            {
                batches.append(current)
                current = Batch()
            }
        }
        if !current.entries.isEmpty { batches.append(current) }
        return batches
    }

    /// Fetches and checks `manifest`'s objects into `directory`; returns the bytes of its entries and
    /// what `alongside` returned. The helper thread runs `alongside` first (work for the other core
    /// while the first batch downloads), then `place` with each checked batch's entries. With
    /// `writingBack`, each object is started on its way to disk as it is checked (for a caller that
    /// keeps the objects and syncs them at the end: little is left to write by then).
    static func run<Alongside>(
        _ manifest: Manifest, from remote: RemoteBackup, into directory: String, writingBack: Bool = false,
        status: (String) -> Void, alongside: () throws -> Alongside, place: ([Manifest.Entry]) throws -> Void
    ) throws -> (bytes: UInt64, alongside: Alongside) {
        for e in manifest.entries {
            let object = BackupFormat.objectPath(e.hash)
            guard remote.contents.objects.contains(object) else {
                throw remote.damaged("\(object) (\(e.path) of snapshot \(manifest.id)) is missing")
            }
        }
        let plan = batches(manifest)
        let objects = plan.reduce(0) { $0 + $1.objects.count }
        let (_, checked) = try Pipeline.run(
            callingThread: .makes,
            make: { send in
                var fetched = 0
                for (k, batch) in plan.enumerated() {
                    status("downloading \(batch.objects.count) objects (\(fetched) of \(objects) done)")
                    try remote.fetch(batch.objects, into: directory, rcloneChecksums: false)
                    fetched += batch.objects.count
                    guard send(k) else { return }
                }
            },
            use: { receive in
                let extra = try alongside()
                let progress = try checkAndPlace(
                    plan, receive: receive, in: directory, writingBack: writingBack, manifest: manifest, place: place)
                return (progress, extra)
            })
        let (progress, extra) = checked
        guard !progress.suspects.isEmpty else { return (progress.bytes, extra) }
        // The second fetch, on this thread (one rclone at a time), of what failed the first time.
        let again = progress.suspects.sorted()
        for object in again { _ = unlink(directory + "/" + object) }
        status("downloading \(again.count) objects again (they did not match their hash)")
        try remote.fetch(again, into: directory, rcloneChecksums: true)
        let hashed = try check(again, in: directory, writingBack: writingBack)
        var bytes = progress.bytes
        for e in progress.waiting {
            let object = BackupFormat.objectPath(e.hash)
            guard let h = hashed[object] else {
                throw remote.damaged("\(object) (\(e.path) of snapshot \(manifest.id)) could not be downloaded")
            }
            guard h.hash == e.hash, h.size == e.size else {
                throw remote.damaged("\(object) (\(e.path) of snapshot \(manifest.id)) does not match its hash")
            }
            bytes += h.size
        }
        try place(progress.waiting)
        return (bytes, extra)
    }

    /// What the helper thread checked: the bytes of the entries placed, the objects that were missing
    /// or failed their hash, and the entries that name them (in the order fetched), not placed yet.
    struct Progress {
        var bytes: UInt64 = 0
        var suspects = Set<String>()
        var waiting: [Manifest.Entry] = []
    }

    /// The hashes of those of `objects` present in `directory`.
    private static func check(
        _ objects: [String], in directory: String, writingBack: Bool
    ) throws -> [String: VaultFiles.Hashed] {
        let present = objects.filter { FileSystem.exists(directory + "/" + $0) }
        let hashed = try VaultFiles.hash(present, under: directory, cache: nil, beginningWriteback: writingBack)
        return Dictionary(zip(present, hashed), uniquingKeysWith: { first, _ in first })
    }

    /// The helper thread's part: checks each downloaded batch (`receive` gives their numbers in
    /// `plan`), then places the entries whose objects passed; the others wait (see `Progress`).
    private static func checkAndPlace(
        _ plan: [Batch], receive: () -> [Int]?, in directory: String, writingBack: Bool, manifest: Manifest,
        place: ([Manifest.Entry]) throws -> Void
    ) throws -> Progress {
        var found: [String: VaultFiles.Hashed] = [:]
        var progress = Progress()
        while let ready = receive() {
            for batch in ready.map({ plan[$0] }) {
                found.merge(try check(batch.objects, in: directory, writingBack: writingBack)) { first, _ in first }
                var passed: [Manifest.Entry] = []
                for e in batch.entries {
                    let object = BackupFormat.objectPath(e.hash)
                    if !progress.suspects.contains(object), let h = found[object], h.hash == e.hash, h.size == e.size {
                        passed.append(e)
                        progress.bytes += h.size
                    } else {
                        progress.suspects.insert(object)
                        progress.waiting.append(e)
                    }
                }
                try place(passed)
            }
        }
        return progress
    }
}
