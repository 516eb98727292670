import VaultSystem

/// A snapshot's objects fetched in batches and each batch checked while the next downloads: the
/// calling thread runs rclone (one at a time) and shows progress; a helper thread checks every
/// object of a downloaded batch against the authenticated manifest — there, of its size, of its
/// hash — and hands the batch's entries to the caller to place. The first failure stops both, and
/// is thrown: nothing is placed that has not passed its check.
enum ObjectDownload {
    /// One rclone run: the objects it fetches, and the manifest entries they complete, in manifest
    /// order (an entry whose object came in an earlier batch goes with the batch that names it).
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

    /// `manifest`'s entries cut into batches, each object fetched once.
    static func batches(_ manifest: Manifest) -> [Batch] {
        var batches: [Batch] = []
        var current = Batch()
        var seen = Set<String>()
        for e in manifest.entries {
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
    /// while the first batch downloads), then `place` with each checked batch's entries.
    static func run<Alongside>(
        _ manifest: Manifest, from remote: RemoteBackup, into directory: String, status: (String) -> Void,
        alongside: () throws -> Alongside, place: ([Manifest.Entry]) throws -> Void
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
                    try remote.fetch(batch.objects, into: directory)
                    fetched += batch.objects.count
                    guard send(k) else { return }
                }
            },
            use: { receive in
                let extra = try alongside()
                let total = try checkAndPlace(
                    plan, receive: receive, in: directory, manifest: manifest, remote: remote.remote, place: place)
                return (total, extra)
            })
        return checked
    }

    /// The helper thread's part: checks each downloaded batch (`receive` gives their numbers in
    /// `plan`), then places its entries; returns the bytes of the entries checked.
    private static func checkAndPlace(
        _ plan: [Batch], receive: () -> [Int]?, in directory: String, manifest: Manifest, remote: String,
        place: ([Manifest.Entry]) throws -> Void
    ) throws -> UInt64 {
        func damaged(_ what: String) -> BackupError { .remoteDamaged(remote: remote, what: what) }
        var found: [String: VaultFiles.Hashed] = [:]
        var total: UInt64 = 0
        while let ready = receive() {
            for batch in ready.map({ plan[$0] }) {
                for object in batch.objects where !FileSystem.exists(directory + "/" + object) {
                    throw damaged("\(object) could not be downloaded")
                }
                let hashed = try VaultFiles.hash(batch.objects, under: directory, cache: nil)
                for (object, h) in zip(batch.objects, hashed) { found[object] = h }
                for e in batch.entries {
                    let object = BackupFormat.objectPath(e.hash)
                    guard let h = found[object], h.hash == e.hash, h.size == e.size else {
                        throw damaged("\(object) (\(e.path) of snapshot \(manifest.id)) does not match its hash")
                    }
                    total += h.size
                }
                try place(batch.entries)
            }
        }
        return total
    }
}
