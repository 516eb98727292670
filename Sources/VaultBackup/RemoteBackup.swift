import VaultCrypto
import VaultFormat
import VaultSystem

/// A backup on a remote as one command sees it: the listing taken at the start, and the small objects
/// (manifests, backup headers) fetched into a private staging directory and checked there.
final class RemoteBackup {
    let rclone: Rclone
    let contents: RemoteContents
    let staging: Staging
    private var fetchCount = 0

    /// Lists the remote; `requireSnapshot` makes an empty or missing remote an error.
    init(rclone: Rclone, requireSnapshot: Bool) throws {
        self.rclone = rclone
        let listing = try rclone.list()
        contents = RemoteContents(listing: listing ?? [])
        staging = try Staging(what: "remote")
        if requireSnapshot && contents.snapshots.isEmpty {
            throw BackupError.noBackup(
                remote: rclone.remote,
                what: listing == nil ? "no such directory, so no backup there" : "holds no backup snapshot")
        }
    }

    var remote: String { rclone.remote }

    func damaged(_ what: String) -> BackupError { .remoteDamaged(remote: remote, what: what) }

    /// Downloads `paths` (relative to the backup's root) into `directory` in one rclone run.
    /// Downloads `paths` into `directory`. Without `rcloneChecksums`, rclone skips its post-copy
    /// checksum: for callers that check every byte against the manifest themselves.
    func fetch(_ paths: [String], into directory: String, rcloneChecksums: Bool = true) throws {
        guard !paths.isEmpty else { return }
        fetchCount += 1
        let list = try staging.writeList("list-\(fetchCount)", paths)
        try rclone.download(to: directory, listFile: list, checksums: rcloneChecksums)
    }

    var fetched: String { staging.path + "/fetched" }

    /// The bytes of a fetched small object; a missing one is damage (it was listed a moment ago).
    func bytes(of path: String, limit: Int) throws -> [UInt8] {
        let full = fetched + "/" + path
        guard FileSystem.exists(full) else { throw damaged("\(path) is missing") }
        return try FileSystem.readFile(full, limit: limit)
    }

    /// Fetches the manifests of `ids` and every backup header.
    func fetchManifests(_ ids: [UInt64]) throws {
        try fetch(
            ids.map(BackupFormat.snapshotPath) + contents.keys.sorted().map { BackupFormat.keysDirectory + "/" + $0 },
            into: fetched)
    }

    func preamble(_ id: UInt64) throws -> Manifest.Preamble {
        let pre: Manifest.Preamble
        do {
            pre = try Manifest.preamble(of: try bytes(of: BackupFormat.snapshotPath(id), limit: Manifest.maximumSize))
        } catch let BackupFormatError.unsupportedVersion(v) {
            throw BackupError.unsupportedVersion(remote: remote, version: v)
        } catch let e as FormatError {
            throw damaged("snapshot \(id): \(e)")
        }
        guard pre.id == id else {
            throw damaged("snapshot \(BackupFormat.snapshotName(id)) holds the manifest of snapshot \(pre.id)")
        }
        return pre
    }

    /// A fetched backup header whose bytes hash to its name; nil when it is not on the remote.
    func header(_ hash: [UInt8]) throws -> BackupHeader? {
        guard contents.keys.contains(hash.hex) else { return nil }
        let bytes = try self.bytes(of: BackupFormat.keyPath(hash), limit: 4096)
        guard try SHA256Stream.digest(bytes) == hash else {
            throw damaged("\(BackupFormat.keyPath(hash)) does not match its hash")
        }
        do { return try BackupHeader(decoding: bytes) } catch let BackupFormatError.unsupportedVersion(v) {
            throw BackupError.unsupportedVersion(remote: remote, version: v)
        } catch {
            throw damaged("\(BackupFormat.keyPath(hash)): \(error)")
        }
    }

    /// The master key, from the backup header snapshot `id` names (the others next, newest snapshot's
    /// first, for a credential changed since). `unlock` opens one header's envelope; a wrong
    /// credential moves on to the next header, any other failure stops.
    func unlock(for id: UInt64, with unlock: (BackupHeader) throws -> SecureBytes) throws -> (SecureBytes, BackupHeader)
    {
        let pre = try preamble(id)
        guard let first = try header(pre.headerHash) else {
            throw damaged("\(BackupFormat.keyPath(pre.headerHash)), the backup header of snapshot \(id), is missing")
        }
        guard first.vaultID == pre.vaultID else {
            throw damaged("the backup header of snapshot \(id) is another vault's")
        }
        var candidates = [first]
        for hex in contents.keys.sorted() where hex != pre.headerHash.hex {
            if let h = try? header([UInt8](hex: hex)!), h.vaultID == pre.vaultID { candidates.append(h) }
        }
        for h in candidates {
            do { return (try unlock(h), h) } catch FormatError.wrongCredential { continue }
        }
        throw FormatError.wrongCredential
    }

    /// Authenticates and parses a fetched manifest.
    func manifest(_ id: UInt64, master: SecureBytes) throws -> Manifest {
        do {
            let m = try Manifest(
                opening: try bytes(of: BackupFormat.snapshotPath(id), limit: Manifest.maximumSize), master: master)
            guard m.id == id else { throw damaged("snapshot \(id) holds the manifest of snapshot \(m.id)") }
            return m
        } catch let e as FormatError {
            throw damaged("snapshot \(id): \(e)")
        }
    }
}
