import Glibc
import VaultCrypto
import VaultSystem

/// The encrypted index on disk: a sealed snapshot plus an append-only journal of sealed change records.
/// A change costs one appended record (O(the change)); now and then the journal is compacted into a
/// new snapshot.
///
///     index/snapshot: "VLTS" | version u16 | vault ID [16] | last seq u64 | nonce [12] | sealed state
///     index/journal:  "VLTJ" | version u16 | vault ID [16]
///                     then records: length u32 | seq u64 | nonce [12] | sealed changes [length]
///
/// Snapshot AAD: "vaultaire.v1.snapshot" ‖ the 30 bytes before the nonce.
/// Record AAD:   "vaultaire.v1.journal" ‖ vault ID ‖ seq. Records carry consecutive sequence numbers
/// starting after the snapshot's, so a dropped, reordered or replayed record is detected.
public final class IndexStore {
    /// The version of `index/snapshot` and `index/journal` this build writes (the header has its own).
    public static let formatVersion = 1
    public static let snapshotLabel = "vaultaire.v1.snapshot"
    public static let journalLabel = "vaultaire.v1.journal"
    static let snapshotMagic: [UInt8] = Array("VLTS".utf8)
    static let journalMagic: [UInt8] = Array("VLTJ".utf8)
    static let journalHeaderSize = 4 + 2 + 16
    static let maximumRecord = 64 << 20
    static let maximumSnapshot = 1 << 30
    /// The journal is read a window at a time, so that its size (which whoever can write the vault
    /// directory controls) never decides how much memory a load takes: at most a window plus one record.
    static let journalWindow = 1 << 20

    public let directory: AnchoredPath
    private let vaultID: [UInt8]
    private let key: SecureBytes
    private var journal: FileDescriptor?
    /// Set when a failed append's partial record could not be cut off: nothing may follow it.
    private var tornTail = false
    /// Sequence number of the last change applied (snapshot or journal).
    public private(set) var lastSeq: UInt64 = 0
    public private(set) var snapshotSeq: UInt64 = 0
    public private(set) var journalBytes = 0
    private var snapshotBytes = 0
    /// Changes accepted with `append(_:deferred: true)`, written with the next record.
    private var waiting: [IndexChange] = []
    public var hasDeferredChanges: Bool { !waiting.isEmpty }

    var snapshotFile: AnchoredPath { directory.appending("snapshot") }
    var journalFile: AnchoredPath { directory.appending("journal") }

    public init(directory: AnchoredPath, vaultID: [UInt8], key: SecureBytes) {
        self.directory = directory
        self.vaultID = vaultID
        self.key = key
    }

    /// Writes a fresh index holding `state`.
    public func create(_ state: IndexState) throws {
        try directory.makeDirectory()
        try writeSnapshot(state, seq: 0)
        try startJournal()
    }

    /// What loading found besides the state: one line each for things repaired on the way.
    public struct LoadReport {
        public var notices: [String] = []
        public var records = 0
    }

    /// Reads and authenticates snapshot and journal; a torn final record (a crash mid-append) is
    /// cut off with a notice, anything else that fails is `damaged`.
    public func load(forWriting: Bool) throws -> (IndexState, LoadReport) {
        var report = LoadReport()
        let snapshot: [UInt8]
        do { snapshot = try snapshotFile.read(limit: IndexStore.maximumSnapshot) } catch let e as SystemError
            where e.errno == ENOENT
        {
            throw FormatError.damaged("index snapshot missing")
        }
        snapshotBytes = snapshot.count
        var state = try openSnapshot(snapshot)
        lastSeq = snapshotSeq

        let flags = forWriting ? O_RDWR : O_RDONLY
        let fd: FileDescriptor
        do { fd = try journalFile.open(flags: flags) } catch let e as SystemError where e.errno == ENOENT {
            throw FormatError.damaged("index journal missing")
        }
        let reader = try WindowedReader(fd, window: IndexStore.journalWindow)
        guard let head = try reader.bytes(at: 0, count: IndexStore.journalHeaderSize),
            Array(head[0..<4]) == IndexStore.journalMagic
        else {
            throw FormatError.damaged("index journal header")
        }
        let journalVersion = Int(head[4]) | Int(head[5]) << 8
        guard journalVersion == IndexStore.formatVersion else { throw FormatError.unsupportedVersion(journalVersion) }
        guard Array(head[6..<22]) == vaultID else {
            throw FormatError.damaged("index journal belongs to another vault")
        }
        var offset = IndexStore.journalHeaderSize
        while offset < reader.size {
            let fixed = 4 + 8 + 12
            guard let recordHead = try reader.bytes(at: offset, count: fixed) else { break }
            var r = ByteReader(recordHead, what: "journal record")
            let length = Int(try r.u32())
            let seq = try r.u64()
            let nonce = try r.raw(12)
            guard length >= AESGCM.tagSize, length <= IndexStore.maximumRecord else {
                throw FormatError.damaged("index journal record at byte \(offset) has impossible length")
            }
            guard let sealed = try reader.bytes(at: offset + fixed, count: length) else { break }
            offset += fixed + length
            if seq <= snapshotSeq { continue }  // already in the snapshot (crash during compaction)
            guard seq == lastSeq + 1 else { throw FormatError.damaged("index journal skips from \(lastSeq) to \(seq)") }
            let plain: [UInt8]
            do {
                plain = try AESGCM.open(sealed, using: key, nonce: nonce, authenticating: recordAAD(seq))
            } catch CryptoError.authenticationFailure {
                throw FormatError.damaged("index journal record \(seq) fails authentication")
            }
            var reader = ByteReader(plain, what: "journal record \(seq)")
            while !reader.isAtEnd { try state.apply(try IndexChange(decoding: &reader)) }
            lastSeq = seq
            report.records += 1
        }
        if offset < reader.size {
            report.notices.append(
                "index journal ended in an incomplete record (interrupted write); \(reader.size - offset) bytes dropped"
            )
            if forWriting {
                try fd.truncate(to: offset)
                try fd.sync()
            }
        }
        journalBytes = offset
        if forWriting {
            journal = try journalFile.open(flags: O_WRONLY | O_APPEND)
        }
        return (state, report)
    }

    /// Appends one sealed record holding `changes` (not yet durable: see `sync`). With `deferred` the
    /// changes wait in memory and go out in the next record written, so that a file's create and its
    /// close cost one record; a record is written in any case before `sync` or `compact` returns.
    public func append(_ changes: [IndexChange], deferred later: Bool = false) throws {
        if later {
            waiting += changes
            return
        }
        let all = waiting.isEmpty ? changes : waiting + changes
        guard !all.isEmpty else { return }
        guard let journal else { preconditionFailure("index opened read-only") }
        var w = ByteWriter(capacity: 256)
        for c in all { c.encode(into: &w) }
        let seq = lastSeq + 1
        let nonce = try SecureRandom.bytes(12)
        let sealed = try AESGCM.seal(w.bytes, using: key, nonce: nonce, authenticating: recordAAD(seq))
        var rec = ByteWriter(capacity: sealed.count + 24)
        rec.u32(UInt32(sealed.count))
        rec.u64(seq)
        rec.raw(nonce)
        rec.raw(sealed)
        guard !tornTail else {
            throw SystemError(
                errno: EIO, operation: "append", path: "index/journal (a cut-short record could not be taken back)")
        }
        do { try journal.append(rec.bytes) } catch {
            // A record cut short (the disk filled mid-write) would make every later record unreadable:
            // take it back, so the journal ends where the last whole record ends — or, if even that
            // fails, append nothing more (the next open drops the torn tail as after a crash).
            do { try journal.truncate(to: journalBytes) } catch { tornTail = true }
            throw error
        }
        waiting = []
        lastSeq = seq
        journalBytes += rec.bytes.count
    }

    /// Makes every appended record durable, deferred changes included.
    public func sync() throws {
        try append([])
        try journal?.dataSync()
    }

    /// Writes any deferred changes and returns the journal's descriptor, so that the caller can make it
    /// durable (`dataSync`) after letting go of its lock: an fdatasync covers every record written
    /// before it, whoever appends meanwhile. Nil for a read-only index.
    public func flushForSync() throws -> FileDescriptor? {
        try append([])
        return journal
    }

    /// Whether the journal has grown enough that a compaction pays off.
    public var wantsCompaction: Bool { journalBytes > max(4 << 20, snapshotBytes) }

    /// Writes `state` (which must include every appended change) as the new snapshot and empties the journal.
    /// Crash-safe: the old journal's records are all ≤ the new snapshot's sequence number and are skipped.
    public func compact(_ state: IndexState) throws {
        try append([])  // deferred changes are in `state` too; written first, they keep the sequence simple
        try writeSnapshot(state, seq: lastSeq)
        try startJournal()
        journal = try journalFile.open(flags: O_WRONLY | O_APPEND)
    }

    public func close() { journal = nil }

    // MARK: Pieces

    private func recordAAD(_ seq: UInt64) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array(IndexStore.journalLabel.utf8))
        w.raw(vaultID)
        w.u64(seq)
        return w.bytes
    }

    private func writeSnapshot(_ state: IndexState, seq: UInt64) throws {
        var head = ByteWriter()
        head.raw(IndexStore.snapshotMagic)
        head.u16(UInt16(IndexStore.formatVersion))
        head.raw(vaultID)
        head.u64(seq)
        let nonce = try SecureRandom.bytes(12)
        let sealed = try AESGCM.seal(
            state.encoded(), using: key, nonce: nonce,
            authenticating: Array(IndexStore.snapshotLabel.utf8) + head.bytes)
        let file = head.bytes + nonce + sealed
        try snapshotFile.replace(with: file)
        snapshotSeq = seq
        snapshotBytes = file.count
    }

    private func openSnapshot(_ bytes: [UInt8]) throws -> IndexState {
        var r = ByteReader(bytes, what: "index snapshot")
        guard try r.raw(4) == IndexStore.snapshotMagic else { throw FormatError.damaged("index snapshot header") }
        let version = Int(try r.u16())
        guard version == IndexStore.formatVersion else { throw FormatError.unsupportedVersion(version) }
        guard try r.raw(16) == vaultID else { throw FormatError.damaged("index snapshot belongs to another vault") }
        let seq = try r.u64()
        let head = Array(bytes[0..<30])
        let nonce = try r.raw(12)
        let sealed = try r.raw(r.remaining)
        let plain: [UInt8]
        do {
            plain = try AESGCM.open(
                sealed, using: key, nonce: nonce, authenticating: Array(IndexStore.snapshotLabel.utf8) + head)
        } catch CryptoError.authenticationFailure {
            throw FormatError.damaged("index snapshot fails authentication")
        }
        snapshotSeq = seq
        return try IndexState(decoding: plain)
    }

    private func startJournal() throws {
        var w = ByteWriter()
        w.raw(IndexStore.journalMagic)
        w.u16(UInt16(IndexStore.formatVersion))
        w.raw(vaultID)
        try journalFile.replace(with: w.bytes)
        journalBytes = w.bytes.count
    }
}

/// Reads a file a window at a time: what a caller holds is bounded by the window and the largest
/// span it asks for, whatever the file's size.
final class WindowedReader {
    private let fd: FileDescriptor
    private let window: Int
    /// The file's size when the reader was made (a journal is read before anyone appends to it).
    let size: Int
    private var buffer: [UInt8] = []
    private var start = 0

    init(_ fd: FileDescriptor, window: Int) throws {
        self.fd = fd
        self.window = window
        self.size = try fd.size()
    }

    /// `count` bytes at `offset`, or nil when the file ends first.
    func bytes(at offset: Int, count: Int) throws -> [UInt8]? {
        guard count >= 0, offset >= 0, count <= size - offset else { return nil }
        if offset < start || offset + count > start + buffer.count {
            start = offset
            buffer = [UInt8](repeating: 0, count: min(size - offset, max(window, count)))
            let n = try buffer.withUnsafeMutableBytes { try fd.read(into: $0, at: offset) }
            buffer.removeLast(buffer.count - n)
            guard n >= count else { return nil }
        }
        return Array(buffer[(offset - start)..<(offset - start + count)])
    }
}
