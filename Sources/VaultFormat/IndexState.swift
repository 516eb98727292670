/// The decrypted index in memory: inode records and directory entries.
public struct IndexState: Equatable {
    public var inodes: [UInt64: Inode] = [:]
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
            guard entries[parent] != nil, inodes[child] != nil else {
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
        var w = ByteWriter(capacity: inodes.count * 128)
        w.u64(nextID)
        if version >= 2 { w.u64(indexSeals) }
        w.u32(UInt32(inodes.count))
        for id in inodes.keys.sorted() { inodes[id]!.encode(into: &w, version: version) }
        let total = entries.values.reduce(0) { $0 + $1.count }
        w.u32(UInt32(total))
        for parent in entries.keys.sorted() {
            for (name, child) in entries[parent]!.sorted(by: { $0.key < $1.key }) {
                w.u64(parent)
                w.string(name)
                w.u64(child)
            }
        }
        return w.bytes
    }

    init(decoding bytes: [UInt8], version: Int = IndexStore.formatVersion) throws {
        var seals: UInt64 = 0
        try self.init(decoding: bytes, version: version, indexSeals: &seals)
    }

    /// Decodes a snapshot's plaintext of index `version`; `indexSeals` gets its count of seals under
    /// the epoch's key before it (0 for version 1).
    init(decoding bytes: [UInt8], version: Int, indexSeals: inout UInt64) throws {
        var r = ByteReader(bytes, what: "index snapshot")
        nextID = try r.u64()
        indexSeals = version >= 2 ? try r.u64() : 0
        let count = Int(try r.u32())
        for _ in 0..<count {
            let inode = try Inode(decoding: &r, version: version)
            inodes[inode.id] = inode
            if inode.kind == .directory { entries[inode.id] = [:] }
        }
        let links = Int(try r.u32())
        for _ in 0..<links {
            let parent = try r.u64()
            let name = try r.string()
            let child = try r.u64()
            guard entries[parent] != nil, inodes[child] != nil else {
                throw FormatError.damaged("snapshot entry points nowhere")
            }
            entries[parent]![name] = child
        }
        try r.expectEnd()
        guard inodes[Inode.rootID]?.kind == .directory else {
            throw FormatError.damaged("snapshot lacks the root directory")
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
