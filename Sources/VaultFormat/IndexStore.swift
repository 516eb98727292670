import Glibc
import VaultCrypto
import VaultSystem

/// The encrypted index on disk: a sealed snapshot plus an append-only journal of sealed change records.
/// A change costs one appended record (O(the change)); now and then the journal is compacted into a
/// new snapshot.
///
/// Version 2 (written):
///
///     index/snapshot: "VLTS" | version u16 | vault ID [16] | last seq u64 | epoch u32 | nonce [12] | sealed state
///     index/journal:  "VLTJ" | version u16 | vault ID [16] | epoch u32
///                     then records: length u32 | seq u64 | nonce [12] | sealed changes [length]
///
/// Snapshot AAD: "vaultaire.v2.snapshot" ‖ the 34 bytes before the nonce.
/// Record AAD:   "vaultaire.v2.journal" ‖ vault ID ‖ epoch ‖ seq. Records carry consecutive sequence
/// numbers starting after the snapshot's, so a dropped, reordered or replayed record is detected.
/// Both are sealed under the epoch's key, HMAC-SHA512(index key, "vaultaire.v2.index-epoch" ‖ epoch):
/// a compaction that finds the key's seal count past `SealBudget.limit` moves to the next epoch.
/// Version 1 (read, then migrated by the first writable open): no epoch, labels "vaultaire.v1.…",
/// sealed under the index key itself, records in their version-1 encoding.
public final class IndexStore {
    /// The version of `index/snapshot` and `index/journal` this build writes (the header has its own).
    public static let formatVersion = 2
    public static let snapshotLabel = "vaultaire.v2.snapshot"
    public static let journalLabel = "vaultaire.v2.journal"
    public static let epochLabel = "vaultaire.v2.index-epoch"
    static let v1SnapshotLabel = "vaultaire.v1.snapshot"
    static let v1JournalLabel = "vaultaire.v1.journal"
    static let snapshotMagic: [UInt8] = Array("VLTS".utf8)
    static let journalMagic: [UInt8] = Array("VLTJ".utf8)
    static func journalHeaderSize(version: Int) -> Int { version >= 2 ? 4 + 2 + 16 + 4 : 4 + 2 + 16 }
    static let maximumRecord = 64 << 20
    static let maximumSnapshot = 1 << 30
    /// The journal is read a window at a time, so that its size (which whoever can write the vault
    /// directory controls) never decides how much memory a load takes: at most a window plus one record.
    static let journalWindow = 1 << 20

    public let directory: AnchoredPath
    let vaultID: [UInt8]
    /// The index key (version 1 seals under it; version 2 derives each epoch's key from it).
    private let key: SecureBytes
    /// The key of `epoch` (version 2), derived at load or at a rotation; wiped with the store.
    private var epochKey: SecureBytes?
    /// The version of the snapshot on disk (1 until a writable open migrates it).
    public private(set) var loadedVersion = IndexStore.formatVersion
    /// Which key seals the index (version 2): rises by one at a compaction past the seal limit.
    public private(set) var epoch: UInt32 = 0
    /// Seals made under the current epoch's key: every snapshot and every journal record sealed in
    /// that epoch (failed appends included), as far as this store knows (see FORMAT.md, "Seal counts").
    public internal(set) var indexSeals: UInt64 = 0
    /// The seal count at which a compaction moves to the next epoch (`SealBudget.limit`; tests lower it).
    public var sealLimit = SealBudget.limit
    var journal: FileDescriptor?
    /// Set when a failed append's partial record could not be cut off: nothing may follow it.
    var tornTail = false
    /// Sequence number of the last change applied (snapshot or journal).
    public private(set) var lastSeq: UInt64 = 0
    public internal(set) var snapshotSeq: UInt64 = 0
    public internal(set) var journalBytes = 0
    var snapshotBytes = 0
    /// Changes accepted with `append(_:deferred: true)`, written with the next record.
    var waiting: [IndexChange] = []
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
        epoch = 0
        indexSeals = 0
        try writeSnapshot(state, seq: 0)
        try startJournal()
    }

    /// The key that seals version-2 snapshots and journals of `epoch`.
    static func epochKey(base: SecureBytes, epoch: UInt32) throws -> SecureBytes {
        var label = Array(IndexStore.epochLabel.utf8)
        withUnsafeBytes(of: epoch.littleEndian) { label.append(contentsOf: $0) }
        let mac = try Digest.hmacSHA512(key: base, message: label)
        defer { mac.wipe() }
        return mac.slice(0..<32)
    }

    func currentKey() throws -> SecureBytes {
        if let epochKey { return epochKey }
        let k = try IndexStore.epochKey(base: key, epoch: epoch)
        epochKey = k
        return k
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
        let snapshot: FileDescriptor
        do { snapshot = try snapshotFile.open(flags: O_RDONLY) } catch let e as SystemError where e.errno == ENOENT {
            throw FormatError.damaged("index snapshot missing")
        }
        // Both opened before the long decode: a compaction by the process that has the vault open
        // replaces the snapshot, then the journal, moments apart; the two opened together belong together.
        let flags = forWriting ? O_RDWR : O_RDONLY
        let fd: FileDescriptor
        do { fd = try journalFile.open(flags: flags) } catch let e as SystemError where e.errno == ENOENT {
            throw FormatError.damaged("index journal missing")
        }
        var state: IndexState
        if let preloaded, let identity = try? SnapshotIdentity(snapshot), identity == preloaded.identity {
            state = preloaded.state
        } else {
            state = try openSnapshot(snapshot)
        }
        preloaded = nil
        lastSeq = snapshotSeq

        let reader = try WindowedReader(fd, window: IndexStore.journalWindow)
        guard let magic = try reader.bytes(at: 0, count: 6), Array(magic[0..<4]) == IndexStore.journalMagic else {
            throw FormatError.damaged("index journal header")
        }
        let journalVersion = Int(magic[4]) | Int(magic[5]) << 8
        guard journalVersion == 1 || journalVersion == 2 else { throw FormatError.unsupportedVersion(journalVersion) }
        let headerSize = IndexStore.journalHeaderSize(version: journalVersion)
        guard let head = try reader.bytes(at: 0, count: headerSize) else {
            throw FormatError.damaged("index journal header")
        }
        guard Array(head[6..<22]) == vaultID else {
            throw FormatError.damaged("index journal belongs to another vault")
        }
        var journalEpoch: UInt32 = 0
        if journalVersion >= 2 {
            var r = ByteReader(Array(head[22..<26]), what: "journal header")
            journalEpoch = try r.u32()
        }
        // A journal of another version or epoch than the snapshot is what a crash during a migration
        // or a key rotation leaves (new snapshot in place, old journal not yet replaced): every record
        // in it must already be in the snapshot.
        let matches = journalVersion == loadedVersion && (journalVersion == 1 || journalEpoch == epoch)
        let journalKey = loadedVersion == 1 ? key : try currentKey()
        var offset = headerSize
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
            guard matches else {
                throw FormatError.damaged(
                    "index journal (version \(journalVersion), epoch \(journalEpoch)) holds record \(seq) "
                        + "after a snapshot of version \(loadedVersion), epoch \(epoch)")
            }
            guard seq == lastSeq + 1 else { throw FormatError.damaged("index journal skips from \(lastSeq) to \(seq)") }
            let plain: [UInt8]
            do {
                plain = try AESGCM.open(
                    sealed, using: journalKey, nonce: nonce,
                    authenticating: IndexStore.recordAAD(
                        vaultID: vaultID, seq: seq, version: journalVersion, epoch: journalEpoch))
            } catch CryptoError.authenticationFailure {
                throw FormatError.damaged("index journal record \(seq) fails authentication")
            }
            var reader = ByteReader(plain, what: "journal record \(seq)")
            while !reader.isAtEnd { try state.apply(try IndexChange(decoding: &reader, version: journalVersion)) }
            lastSeq = seq
            if matches { indexSeals += 1 }
            report.records += 1
        }
        if offset < reader.size {
            report.notices.append(
                "index journal ended in an incomplete record (interrupted write); \(reader.size - offset) bytes dropped"
            )
            if forWriting && matches {
                try fd.truncate(to: offset)
                try fd.sync()
            }
        }
        journalBytes = offset
        if forWriting {
            if loadedVersion < IndexStore.formatVersion {
                // Writers write version 2 only: the first writable open migrates the index (a new
                // snapshot, then an empty journal; a crash between the two is the case above).
                try compact(state)
                report.notices.append("index migrated to version \(IndexStore.formatVersion)")
            } else {
                if !matches { try startJournal() }
                journal = try journalFile.open(flags: O_WRONLY | O_APPEND)
            }
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
        indexSeals += 1  // counted before the seal: a failed write below still used the nonce
        let sealed = try AESGCM.seal(
            w.bytes, using: try currentKey(), nonce: nonce,
            authenticating: IndexStore.recordAAD(
                vaultID: vaultID, seq: seq, version: IndexStore.formatVersion, epoch: epoch))
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

    /// A snapshot decoded by `preloadSnapshot`, for `load` to take if the file is still the same.
    private var preloaded: (identity: SnapshotIdentity, state: IndexState)?

    /// Which file a snapshot was read from: a compaction in between replaces it (another inode, and
    /// another change time).
    struct SnapshotIdentity: Equatable {
        let device: UInt64
        let inode: UInt64
        let size: Int
        let changed: Int64

        init(_ fd: FileDescriptor) throws {
            var st = stat()
            guard fstat(fd.rawValue, &st) == 0 else {
                throw SystemError(errno: errno, operation: "fstat", path: fd.path)
            }
            device = UInt64(st.st_dev)
            inode = UInt64(st.st_ino)
            size = Int(st.st_size)
            changed = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
        }
    }

    /// Decodes the snapshot ahead of `load`, so that an open can do it while it scans the vault
    /// directory on another thread; reads only. A failure leaves `load` to decode (and report) it.
    public func preloadSnapshot() {
        guard let fd = try? snapshotFile.open(flags: O_RDONLY), let identity = try? SnapshotIdentity(fd),
            let state = try? openSnapshot(fd)
        else { return }
        preloaded = (identity, state)
    }

    /// The journal's length below which no compaction is worth it (tests lower it).
    public var compactionFloor = 4 << 20

    /// `VAULTAIRE_TEST_COMPACTION_BYTES`: compact whenever the journal passes this many bytes, however
    /// large the snapshot (the benchmarks use it to measure requests during compactions of a large
    /// vault; it only makes compactions more frequent).
    static let forcedCompactionBytes: Int? = {
        guard let text = getenv("VAULTAIRE_TEST_COMPACTION_BYTES").map({ String(cString: $0) }),
            let value = Int(text), value >= 4096
        else { return nil }
        return value
    }()

    /// The journal's length past which a compaction pays off: the snapshot's (so that rewriting it
    /// costs at most as much again as the journal did), and never less than `compactionFloor`.
    var compactionThreshold: Int {
        IndexStore.forcedCompactionBytes.map { min($0, max(compactionFloor, snapshotBytes)) }
            ?? max(compactionFloor, snapshotBytes)
    }

    /// Whether the journal has grown enough that a compaction pays off.
    public var wantsCompaction: Bool {
        journalBytes > compactionThreshold || indexSeals >= sealLimit
            || loadedVersion < IndexStore.formatVersion
    }

    /// Writes `state` (which must include every appended change) as the new snapshot and empties the journal.
    /// Crash-safe: the old journal's records are all ≤ the new snapshot's sequence number and are skipped.
    public func compact(_ state: IndexState) throws {
        if journal != nil {
            try append([])  // deferred changes are in `state` too; written first, they keep the sequence simple
        }
        if loadedVersion < IndexStore.formatVersion {
            epoch = 0
            indexSeals = 0
            epochKey = nil
        } else if indexSeals + 1 >= sealLimit {
            // Key rotation: the new snapshot and journal are sealed under the next epoch's key.
            epoch += 1
            indexSeals = 0
            epochKey?.wipe()
            epochKey = nil
        }
        try writeSnapshot(state, seq: lastSeq)
        loadedVersion = IndexStore.formatVersion
        try startJournal()
        journal = try journalFile.open(flags: O_WRONLY | O_APPEND)
    }

    public func close() {
        journal = nil
        epochKey?.wipe()
    }

    // MARK: Pieces

    /// The AAD of journal record `seq` in a journal of `version` (and, version 2, `epoch`).
    static func recordAAD(vaultID: [UInt8], seq: UInt64, version: Int, epoch: UInt32) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array((version >= 2 ? IndexStore.journalLabel : IndexStore.v1JournalLabel).utf8))
        w.raw(vaultID)
        if version >= 2 { w.u32(epoch) }
        w.u64(seq)
        return w.bytes
    }

    /// A version-2 snapshot's 34 bytes before the nonce.
    static func snapshotHead(vaultID: [UInt8], seq: UInt64, epoch: UInt32) -> [UInt8] {
        var head = ByteWriter()
        head.raw(IndexStore.snapshotMagic)
        head.u16(UInt16(IndexStore.formatVersion))
        head.raw(vaultID)
        head.u64(seq)
        head.u32(epoch)
        return head.bytes
    }

    /// The AAD of a snapshot of `version` whose bytes before the nonce are `head`.
    static func snapshotAAD(head: [UInt8], version: Int) -> [UInt8] {
        Array((version >= 2 ? IndexStore.snapshotLabel : IndexStore.v1SnapshotLabel).utf8) + head
    }

    private func writeSnapshot(_ state: IndexState, seq: UInt64) throws {
        let head = IndexStore.snapshotHead(vaultID: vaultID, seq: seq, epoch: epoch)
        let nonce = try SecureRandom.bytes(12)
        let sealsBefore = indexSeals
        indexSeals += 1
        snapshotBytes = try IndexStore.sealSnapshot(
            state, to: snapshotFile, head: head, nonce: nonce, sealsBefore: sealsBefore, key: try currentKey())
        snapshotSeq = seq
    }

    /// Seals the snapshot as it is encoded, a piece at a time, into the file that replaces `file`
    /// (written, synced, renamed into place, its directory synced); returns its length. Touches
    /// nothing of a store's state, so a compaction can run it outside the vault's lock.
    static func sealSnapshot(
        _ state: IndexState, to file: AnchoredPath, head: [UInt8], nonce: [UInt8], sealsBefore: UInt64,
        key: SecureBytes
    ) throws -> Int {
        let cipher = try AESGCMStream(
            sealing: true, key: key, nonce: nonce,
            authenticating: IndexStore.snapshotAAD(head: head, version: IndexStore.formatVersion))
        var end = 0
        // Written back as it goes, 8 MiB at a time, at most 16 MiB dirty: a snapshot of a large vault
        // written into the page cache whole would make the journal appends of the requests meanwhile
        // wait for the kernel to write it out.
        let stride = 8 << 20
        var started = 0
        var waited = 0
        try file.replace { fd in
            try fd.write(head + nonce, at: 0)
            end = head.count + nonce.count
            try state.encode(version: IndexStore.formatVersion, indexSeals: sealsBefore) { plain in
                var piece = plain
                try piece.withUnsafeMutableBytes { try cipher.update(UnsafeRawBufferPointer($0), into: $0) }
                try fd.write(piece, at: end)
                end += piece.count
                guard end - started >= stride else { return }
                if started > waited {
                    try fd.writeBack(offset: waited, length: started - waited, waiting: true)
                    waited = started
                }
                try fd.writeBack(offset: started, length: end - started, waiting: false)
                started = end
            }
            try fd.write(try cipher.finishSealing(), at: end)
            end += AESGCM.tagSize
        }
        return end
    }

    /// Reads, decrypts and decodes the snapshot a piece at a time, so that it is never in memory whole
    /// (twice, as ciphertext and plaintext). The index built from the pieces is returned only once the
    /// tag has verified; a parse error is reported as such only then too, so damage always reads as
    /// failed authentication.
    private func openSnapshot(_ fd: FileDescriptor) throws -> IndexState {
        let size = try fd.size()
        guard size <= IndexStore.maximumSnapshot else { throw FormatError.damaged("index snapshot too large") }
        let prefix = try fd.read(count: Swift.min(size, 34 + AESGCM.nonceSize))
        var r = ByteReader(prefix, what: "index snapshot")
        guard try r.raw(4) == IndexStore.snapshotMagic else { throw FormatError.damaged("index snapshot header") }
        let version = Int(try r.u16())
        guard version == 1 || version == 2 else { throw FormatError.unsupportedVersion(version) }
        guard try r.raw(16) == vaultID else { throw FormatError.damaged("index snapshot belongs to another vault") }
        let seq = try r.u64()
        let found = version >= 2 ? try r.u32() : 0
        let headSize = version >= 2 ? 34 : 30
        let head = Array(prefix[0..<headSize])
        let nonce = try r.raw(AESGCM.nonceSize)
        let bodyStart = headSize + AESGCM.nonceSize
        let bodyEnd = size - AESGCM.tagSize
        guard bodyEnd >= bodyStart else { throw FormatError.damaged("index snapshot fails authentication") }
        let tag = try fd.read(count: AESGCM.tagSize, at: bodyEnd)
        loadedVersion = version
        epoch = found
        epochKey?.wipe()
        epochKey = nil
        let cipher = try AESGCMStream(
            sealing: false, key: version >= 2 ? try currentKey() : key, nonce: nonce,
            authenticating: IndexStore.snapshotAAD(head: head, version: version))
        var position = bodyStart
        let nextPiece: () throws -> [UInt8]? = {
            guard position < bodyEnd else { return nil }
            let wanted = Swift.min(1 << 20, bodyEnd - position)
            var piece = try fd.read(count: wanted, at: position)
            guard piece.count == wanted else { throw FormatError.damaged("index snapshot ends early") }
            try piece.withUnsafeMutableBytes { try cipher.update(UnsafeRawBufferPointer($0), into: $0) }
            position += piece.count
            return piece
        }
        func verify() throws {
            do { try cipher.finishOpening(tag: tag) } catch CryptoError.authenticationFailure {
                throw FormatError.damaged("index snapshot fails authentication")
            }
        }
        var sealsBefore: UInt64 = 0
        let state: IndexState
        do {
            // Read and decrypted on a thread of its own, a few pieces ahead of the decoding (the longer
            // part): the file's reads and the cipher are off the decoder's path.
            (_, state) = try Pipeline.run(
                callingThread: .uses, capacity: 4,
                make: { send in
                    while let piece = try nextPiece() { guard send(piece) else { return } }
                },
                use: { receive in
                    try withoutActuallyEscaping(receive) { receive in
                        var arrived: [[UInt8]] = []
                        var taken = 0
                        return try IndexState(
                            decodingPieces: {
                                if taken == arrived.count {
                                    guard let more = receive() else { return nil }
                                    (arrived, taken) = (more, 0)
                                }
                                taken += 1
                                return arrived[taken - 1]
                            }, version: version, indexSeals: &sealsBefore)
                    }
                })
        } catch {
            // What failed is reported only once the tag has been checked: the rest is decrypted first.
            while try nextPiece() != nil {}
            try verify()
            throw error
        }
        try verify()
        snapshotSeq = seq
        snapshotBytes = size
        indexSeals = version >= 2 ? sealsBefore + 1 : 0
        return state
    }

    private func startJournal() throws {
        let head = journalHead()
        try journalFile.replace(with: head)
        journalBytes = head.count
    }

    func journalHead() -> [UInt8] {
        var w = ByteWriter()
        w.raw(IndexStore.journalMagic)
        w.u16(UInt16(IndexStore.formatVersion))
        w.raw(vaultID)
        w.u32(epoch)
        return w.bytes
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
