/// The decrypted index in memory: inode records and directory entries.
public struct IndexState: Equatable {
    public var inodes = InodeTable()
    /// Directory inode → (name → child inode).
    public var entries: [UInt64: [String: UInt64]] = [:]
    public var nextID: UInt64 = Inode.rootID + 1

    public init() {}

    /// A fresh index with only the root directory.
    public static func empty(uid: UInt32, gid: UInt32, now: Int64) -> IndexState {
        var state = IndexState()
        state.inodes[Inode.rootID] = Inode(
            id: Inode.rootID, kind: .directory, permissions: 0o755, uid: uid, gid: gid, now: now)
        state.entries[Inode.rootID] = [:]
        return state
    }

    /// Applies one change; an impossible change means the index is damaged.
    public mutating func apply(_ change: IndexChange) throws {
        switch change {
        case .putInode(let inode):
            guard inode.id >= Inode.rootID, inode.id < UInt64.max else {
                throw FormatError.damaged("inode number \(inode.id) out of range")
            }
            inodes[inode.id] = inode
            if inode.kind == .directory, entries[inode.id] == nil { entries[inode.id] = [:] }
            if inode.id >= nextID { nextID = inode.id + 1 }
        case .removeInode(let id):
            guard id != Inode.rootID else { throw FormatError.damaged("index removes the root") }
            inodes[id] = nil
            entries[id] = nil
        case .link(let parent, let name, let child):
            guard entries[parent] != nil, inodes.contains(child) else {
                throw FormatError.damaged("index links \(child) into missing directory or from missing inode")
            }
            entries[parent]![name] = child
        case .unlink(let parent, let name):
            guard entries[parent]?[name] != nil else { throw FormatError.damaged("index unlinks a missing entry") }
            entries[parent]![name] = nil
        }
    }

    // Snapshot plaintext: nextID u64 | [v2: index seals u64] | count u32 | inodes… | count u32 |
    // (parent u64, name, child u64)…
    func encoded(version: Int = IndexStore.formatVersion, indexSeals: UInt64 = 0) -> [UInt8] {
        var all: [UInt8] = []
        encode(version: version, indexSeals: indexSeals) { all += $0 }
        return all
    }

    /// Writes the snapshot's plaintext in pieces of about `pieceSize` bytes, handed to `emit` in order:
    /// a vault of a million files has a snapshot of about 170 MB, which is never held whole.
    func encode(
        version: Int = IndexStore.formatVersion, indexSeals: UInt64 = 0, pieceSize: Int = 1 << 20,
        emit: ([UInt8]) throws -> Void
    ) rethrows {
        var w = ByteWriter(capacity: pieceSize + 4096)
        w.u64(nextID)
        if version >= 2 { w.u64(indexSeals) }
        w.u32(UInt32(inodes.count))
        for id in inodes.keys.sorted() {
            inodes[id]!.encode(into: &w, version: version)
            if w.bytes.count >= pieceSize { try emit(w.takeBytes()) }
        }
        let total = entries.values.reduce(0) { $0 + $1.count }
        w.u32(UInt32(total))
        for parent in entries.keys.sorted() {
            for (name, child) in entries[parent]!.sorted(by: { $0.key < $1.key }) {
                w.u64(parent)
                w.string(name)
                w.u64(child)
                if w.bytes.count >= pieceSize { try emit(w.takeBytes()) }
            }
        }
        if !w.bytes.isEmpty { try emit(w.takeBytes()) }
    }

    init(decoding bytes: [UInt8], version: Int = IndexStore.formatVersion) throws {
        var seals: UInt64 = 0
        try self.init(decoding: bytes, version: version, indexSeals: &seals)
    }

    /// Decodes a snapshot's plaintext of index `version`; `indexSeals` gets its count of seals under
    /// the epoch's key before it (0 for version 1).
    init(decoding bytes: [UInt8], version: Int, indexSeals: inout UInt64) throws {
        var given = false
        try self.init(
            decodingPieces: {
                defer { given = true }
                return given ? nil : bytes
            }, version: version, indexSeals: &indexSeals)
    }

    /// Decodes a snapshot's plaintext that `next` hands over piece by piece (nil at the end).
    init(decodingPieces next: @escaping () throws -> [UInt8]?, version: Int, indexSeals: inout UInt64) throws {
        var input = PieceReader(what: "index snapshot", next: next)
        nextID = try input.read { try $0.u64() }
        indexSeals = version >= 2 ? try input.read { try $0.u64() } : 0
        let count = Int(try input.read { try $0.u32() })
        var strings = RecentStrings()
        func take(_ inode: Inode) throws {
            // Parsed before the tag is checked: a bad number must be an error, never a trap.
            guard inode.id >= Inode.rootID, inode.id < UInt64.max else {
                throw FormatError.damaged("inode number \(inode.id) out of range")
            }
            inodes[inode.id] = inode
            if inode.kind == .directory { entries[inode.id] = [:] }
        }
        try input.readEach(count, parse: { try Inode(decoding: &$0, version: version, strings: &strings) }, take: take)
        let links = Int(try input.read { try $0.u32() })
        // Entries come sorted by directory: each directory's are gathered, then stored at once in a
        // dictionary made the right size.
        var directory: UInt64 = 0
        var gathered: [(name: String, child: UInt64)] = []
        func store() throws {
            guard !gathered.isEmpty else { return }
            guard var existing = entries.removeValue(forKey: directory) else {
                throw FormatError.damaged("snapshot entry points nowhere")
            }
            existing.reserveCapacity(existing.count + gathered.count)
            for (name, child) in gathered { existing[name] = child }
            entries[directory] = existing
            gathered.removeAll(keepingCapacity: true)
        }
        func link(_ parent: UInt64, _ name: String, _ child: UInt64) throws {
            guard inodes.contains(child) else { throw FormatError.damaged("snapshot entry points nowhere") }
            if parent != directory {
                try store()
                directory = parent
            }
            gathered.append((name, child))
        }
        try input.readEach(links, parse: { r in (try r.u64(), try r.string(), try r.u64()) }, take: link)
        try store()
        try input.expectEnd()
        guard inodes.kind(of: Inode.rootID) == .directory else {
            throw FormatError.damaged("snapshot lacks the root directory")
        }
    }
}

/// Reads values from a byte stream that arrives in pieces, each value parsed by a `ByteReader` over
/// what has arrived; a value cut by the end of a piece is parsed again once more has come.
struct PieceReader {
    private var window: [UInt8] = []
    private var offset = 0
    private var exhausted = false
    private let what: String
    private let next: () throws -> [UInt8]?

    init(what: String, next: @escaping () throws -> [UInt8]?) {
        self.what = what
        self.next = next
    }

    mutating func read<T>(_ parse: (inout ByteReader) throws -> T) throws -> T {
        while true {
            var r = ByteReader(window, what: what, from: offset)
            do {
                let value = try parse(&r)
                offset = r.offset
                return value
            } catch  where r.ranOut && !exhausted {}
            try refill()
        }
    }

    /// Parses `count` values in order, handing each to `take` once it has parsed whole: all that have
    /// arrived are parsed through one `ByteReader` (one per value costs a reference count each).
    mutating func readEach<T>(
        _ count: Int, parse: (inout ByteReader) throws -> T, take: (T) throws -> Void
    ) throws {
        var done = 0
        while done < count {
            do {
                var r = ByteReader(window, what: what, from: offset)
                while done < count {
                    let value: T
                    do { value = try parse(&r) } catch  where r.ranOut && !exhausted { break }
                    offset = r.offset
                    done += 1
                    try take(value)
                }
            }
            // The reader is gone: the window is changed in place, not copied.
            if done < count { try refill() }
        }
    }

    /// Whether the stream has ended exactly here; throws if bytes follow.
    mutating func expectEnd() throws {
        while offset == window.count && !exhausted { try refill() }
        guard offset == window.count else {
            throw FormatError.malformed("\(what) has trailing bytes")
        }
    }

    /// Drops what was read and takes in at least as much again as is left (one piece at least): a
    /// value larger than a piece is parsed O(log size) times, not once per piece.
    private mutating func refill() throws {
        let wanted = Swift.max(window.count - offset, 1)
        window.removeFirst(offset)
        offset = 0
        var added = 0
        while added < wanted {
            guard let piece = try next() else {
                exhausted = true
                return
            }
            window += piece
            added += piece.count
        }
    }
}

/// Entry points for the fuzz targets: the parsers of decrypted index data, exposed without keys.
public enum IndexCodec {
    /// Parses a snapshot's plaintext.
    public static func decodeSnapshot(_ bytes: [UInt8]) throws -> IndexState { try IndexState(decoding: bytes) }

    /// Parses a journal record's plaintext and applies it to an empty index.
    public static func decodeAndApplyRecord(_ bytes: [UInt8]) throws -> IndexState {
        var state = IndexState.empty(uid: 0, gid: 0, now: 0)
        var r = ByteReader(bytes, what: "journal record")
        while !r.isAtEnd { try state.apply(try IndexChange(decoding: &r)) }
        return state
    }
}
