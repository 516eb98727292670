import Glibc
import VaultSystem

/// A blob modified after the index was last written. A sync client brings another machine's files
/// in no particular order, so for a while a vault in a sync folder can hold that machine's new
/// contents without the index that names them; a newest-wins client can also keep this machine's
/// index beside the other machine's blobs. Either way the index is older than a blob, and writing
/// now would build on an index that does not know that blob.
///
/// Only candidates are found here, by time: the engine then asks the index whether it accounts for
/// each (a record names the blob, with the length and header that record expects). Times alone
/// would not do: this machine's own work can leave a blob newer than the journal (a hole punched
/// after its record was made durable), and clocks differ between machines.
///
/// Cheap enough for every open: the 256 fan-out directories are stat'ed, and only those changed
/// since the index was (a sync client puts a file in place by renaming, which changes its directory)
/// are listed and their blobs stat'ed. A client that rewrites a blob in place changes no directory
/// and is not seen.
public struct BlobNewerThanIndex: Equatable, Sendable {
    public let blobID: [UInt8]
    /// Its path inside the vault directory ("blobs/ab/…").
    public let path: String
    /// Its length on disk.
    public let length: Int

    /// Every blob whose modification time is later than both the index snapshot's and the journal's,
    /// sorted by path; none when the index has neither file (the open reports that on its own).
    /// Nothing is opened for writing and no symbolic link is followed.
    public static func scan(_ layout: VaultLayout) throws -> [BlobNewerThanIndex] {
        let index = try layout.indexDirectory()
        let times = try ["snapshot", "journal"].compactMap { try index.appending($0).status()?.modified }
        guard let indexTime = times.max() else { return [] }
        let blobs = try layout.directory().file("blobs")
        let fanOut: [AnchoredPath.Entry]
        do { fanOut = try blobs.entries() } catch let e as SystemError where e.errno == ENOENT { return [] }
        var found: [BlobNewerThanIndex] = []
        for sub in fanOut where sub.isDirectory && sub.name.utf8.count == 2 {
            let directory = blobs.appending(sub.name)
            guard let status = try directory.status(), status.modified > indexTime else { continue }
            for entry in try directory.entries() where entry.name.utf8.count == 30 {
                guard let id = [UInt8](hex: sub.name + entry.name),
                    let blob = try directory.appending(entry.name).status(),
                    blob.isRegularFile, blob.modified > indexTime
                else { continue }
                found.append(BlobNewerThanIndex(blobID: id, path: "blobs/\(sub.name)/\(entry.name)", length: blob.size))
            }
        }
        return found.sorted { $0.path < $1.path }
    }
}
