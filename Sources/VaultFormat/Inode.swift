/// One record of the inode-style index: what a file, directory or special node is, apart from its names.
/// Directory entries (name → inode) live beside the records, so hard links, renames and files that stay
/// open after unlink all fall out naturally.
public struct Inode: Equatable {
    public enum Kind: UInt8 {
        case file = 1
        case directory = 2
        case symlink = 3
        case fifo = 4
        case socket = 5
        case characterDevice = 6
        case blockDevice = 7
    }

    public static let rootID: UInt64 = 1

    public var id: UInt64
    public var kind: Kind
    /// Permission bits including setuid, setgid and sticky (`0o7777`).
    public var permissions: UInt32
    public var uid: UInt32
    public var gid: UInt32
    public var linkCount: UInt32
    /// Plaintext length in bytes (files), target length (symlinks), 0 otherwise.
    public var size: UInt64
    /// Nanoseconds since the Unix epoch.
    public var accessTime: Int64
    public var modificationTime: Int64
    public var changeTime: Int64
    public var birthTime: Int64
    public var deviceNumber: UInt64
    /// The content blob's random identifier (files only); also its name on disk.
    public var blobID: [UInt8]
    public var mimeType: String
    public var symlinkTarget: [UInt8]
    public var extendedAttributes: [String: [UInt8]]
    /// Set while the file's blob may be ahead of this record (written since the last commit); the
    /// next open reconciles such files after a crash.
    public var needsCheck: Bool
    /// Bumped each session the file is first opened for writing, and sealed into the blob's header too,
    /// so a whole blob rolled back to an older version no longer matches its record.
    public var contentVersion: UInt64
    /// The layout of the file's blob (`FileBlob.layoutVersion` when it was made): 1 or 2. Records of
    /// index version 1 name only layout-1 blobs.
    public var blobLayout: UInt8
    /// Chunk ranges that read as zeros and are not stored in the blob (sparse files), sorted, disjoint,
    /// none empty, all below the file's chunk count. Authenticated with the record, so no one without
    /// the key can turn stored data into a hole.
    public var holes: [Range<Int>]
    /// How many chunks have been sealed under the file's current content key (see FORMAT.md, "Seal
    /// counts"); a new key resets it. Records of index version 1 carry none: 0.
    public var contentSeals: UInt64

    public init(id: UInt64, kind: Kind, permissions: UInt32, uid: UInt32, gid: UInt32, now: Int64) {
        self.id = id
        self.kind = kind
        self.permissions = permissions & 0o7777
        self.uid = uid
        self.gid = gid
        self.linkCount = kind == .directory ? 2 : 1
        self.size = 0
        self.accessTime = now
        self.modificationTime = now
        self.changeTime = now
        self.birthTime = now
        self.deviceNumber = 0
        self.blobID = []
        self.mimeType = ""
        self.symlinkTarget = []
        self.extendedAttributes = [:]
        self.needsCheck = false
        self.contentVersion = 1
        self.blobLayout = kind == .file ? UInt8(Inode.currentBlobLayout) : 0
        self.holes = []
        self.contentSeals = 0
    }

    /// The blob layout new files get (kept equal to `FileBlob.layoutVersion`).
    public static let currentBlobLayout = 2
    /// At most this many hole ranges in one record; a file with more has the rest written as zeros.
    public static let maximumHoles = 4096

    static let maximumXattrValue = 64 * 1024
    static let maximumSymlink = 4096

    /// Encodes the record as index `version` writes it (1: the original fields only; 2 adds the
    /// blob layout, the holes and the content seal count after the extended attributes).
    func encode(into w: inout ByteWriter, version: Int = IndexStore.formatVersion) {
        w.u64(id)
        w.u8(kind.rawValue)
        w.u32(permissions)
        w.u32(uid)
        w.u32(gid)
        w.u32(linkCount)
        w.u64(size)
        w.i64(accessTime)
        w.i64(modificationTime)
        w.i64(changeTime)
        w.i64(birthTime)
        w.u64(deviceNumber)
        w.u8(UInt8(blobID.count))
        w.raw(blobID)
        w.string(mimeType)
        w.blob(symlinkTarget)
        w.u8(needsCheck ? 1 : 0)
        w.u64(contentVersion)
        w.u16(UInt16(extendedAttributes.count))
        for (name, value) in extendedAttributes.sorted(by: { $0.key < $1.key }) {
            w.string(name)
            w.blob(value)
        }
        guard version >= 2 else { return }
        w.u8(blobLayout)
        w.u32(UInt32(holes.count))
        for hole in holes {
            w.u64(UInt64(hole.lowerBound))
            w.u64(UInt64(hole.count))
        }
        w.u64(contentSeals)
    }

    init(decoding r: inout ByteReader, version: Int = IndexStore.formatVersion) throws {
        var unshared = RecentStrings()
        try self.init(decoding: &r, version: version, strings: &unshared)
    }

    /// Decodes with `strings` handing out one copy of MIME types seen just before (a snapshot's
    /// records, in inode order, repeat a few types a million times).
    init(decoding r: inout ByteReader, version: Int, strings: inout RecentStrings) throws {
        id = try r.u64()
        guard let k = Kind(rawValue: try r.u8()) else { throw FormatError.malformed("inode kind") }
        kind = k
        permissions = try r.u32() & 0o7777
        uid = try r.u32()
        gid = try r.u32()
        linkCount = try r.u32()
        size = try r.u64()
        accessTime = try r.i64()
        modificationTime = try r.i64()
        changeTime = try r.i64()
        birthTime = try r.i64()
        deviceNumber = try r.u64()
        let blobLength = Int(try r.u8())
        guard blobLength == 0 || blobLength == 16 else { throw FormatError.malformed("blob identifier length") }
        blobID = try r.raw(blobLength)
        mimeType = try strings.string(from: &r)
        symlinkTarget = try r.blob(limit: Inode.maximumSymlink)
        needsCheck = try r.u8() != 0
        contentVersion = try r.u64()
        let count = Int(try r.u16())
        extendedAttributes = [:]
        for _ in 0..<count {
            let name = try r.string()
            extendedAttributes[name] = try r.blob(limit: Inode.maximumXattrValue)
        }
        guard version >= 2 else {
            blobLayout = kind == .file ? 1 : 0
            holes = []
            contentSeals = 0
            return
        }
        blobLayout = try r.u8()
        guard kind == .file ? (blobLayout == 1 || blobLayout == 2) : blobLayout == 0 else {
            throw FormatError.malformed("blob layout \(blobLayout)")
        }
        let holeCount = Int(try r.u32())
        guard holeCount <= Inode.maximumHoles, kind == .file || holeCount == 0 else {
            throw FormatError.malformed("hole count")
        }
        holes = []
        var end = 0
        for _ in 0..<holeCount {
            let first = try r.u64()
            let count = try r.u64()
            // Sorted, disjoint, not touching (writers merge neighbours), none empty, within Int.
            guard count > 0, first < UInt64(Int.max / 2), count < UInt64(Int.max / 2),
                Int(first) > end || (holes.isEmpty && first == 0)
            else { throw FormatError.malformed("hole list") }
            holes.append(Int(first)..<Int(first + count))
            end = Int(first + count)
        }
        contentSeals = try r.u64()
    }
}

/// One change to the index, as stored in a journal record.
public enum IndexChange: Equatable {
    /// Insert or replace an inode record.
    case putInode(Inode)
    /// Delete an inode record (its last link and last open handle are gone).
    case removeInode(UInt64)
    /// Add the entry `name` in directory `parent`, pointing at `child`.
    case link(parent: UInt64, name: String, child: UInt64)
    /// Remove the entry `name` from directory `parent`.
    case unlink(parent: UInt64, name: String)

    func encode(into w: inout ByteWriter, version: Int = IndexStore.formatVersion) {
        switch self {
        case .putInode(let inode):
            w.u8(1)
            inode.encode(into: &w, version: version)
        case .removeInode(let id):
            w.u8(2)
            w.u64(id)
        case .link(let parent, let name, let child):
            w.u8(3)
            w.u64(parent)
            w.string(name)
            w.u64(child)
        case .unlink(let parent, let name):
            w.u8(4)
            w.u64(parent)
            w.string(name)
        }
    }

    init(decoding r: inout ByteReader, version: Int = IndexStore.formatVersion) throws {
        switch try r.u8() {
        case 1: self = .putInode(try Inode(decoding: &r, version: version))
        case 2: self = .removeInode(try r.u64())
        case 3: self = .link(parent: try r.u64(), name: try r.string(), child: try r.u64())
        case 4: self = .unlink(parent: try r.u64(), name: try r.string())
        case let tag: throw FormatError.malformed("index change tag \(tag)")
        }
    }
}
