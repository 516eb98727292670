/// The index's inode records in memory, packed so that a vault of a million files fits in about a
/// hundred megabytes: each record is a fixed-size value with no references (the blob ID inline, the
/// MIME type an index into a table of the distinct types), in pages of a few thousand; the fields most records leave
/// empty — symbolic link targets, extended attributes, holes, device numbers — live in a side table.
/// Records go in and come out as `Inode` values, so the rest of the engine never sees the packing.
public struct InodeTable: Equatable, Sequence {
    /// One record with no heap storage of its own. `id` 0 marks a free slot (inode numbers start at 1).
    struct Packed {
        var id: UInt64
        var size: UInt64
        var accessTime: Int64
        var modificationTime: Int64
        var changeTime: Int64
        var birthTime: Int64
        var contentVersion: UInt64
        var contentSeals: UInt64
        var blobHigh: UInt64
        var blobLow: UInt64
        var uid: UInt32
        var gid: UInt32
        var linkCount: UInt32
        var permissions: UInt16
        var mimeType: UInt16
        var kind: UInt8
        var blobLayout: UInt8
        var flags: UInt8

        static let needsCheck: UInt8 = 1
        static let hasBlobID: UInt8 = 2
        static let hasExtras: UInt8 = 4
    }

    /// What few records have; a record with none of it has no entry here.
    struct Extras: Equatable {
        var symlinkTarget: [UInt8] = []
        var extendedAttributes: [String: [UInt8]] = [:]
        var holes: [Range<Int>] = []
        var deviceNumber: UInt64 = 0
        /// A MIME type that did not fit the type table (more than `MIMETypeTable.capacity` distinct ones).
        var mimeType: String?

        var isEmpty: Bool {
            symlinkTarget.isEmpty && extendedAttributes.isEmpty && holes.isEmpty && deviceNumber == 0
                && mimeType == nil
        }
    }

    private var records = PagedArray<Packed>()
    /// Slot in `records` of inode `id`, for ids below its count (`UInt32.max`: none). Inode numbers
    /// are handed out in sequence, so a plain array costs four bytes per number ever used.
    private var slotByID = PagedArray<UInt32>()
    /// Slots of ids too far beyond the others for `slotByID` (only a vault edited by hand has them).
    private var distantSlots: [UInt64: UInt32] = [:]
    private var freeSlots: [UInt32] = []
    private var extras: [UInt64: Extras] = [:]
    private var mimeTypes = MIMETypeTable()
    public private(set) var count = 0

    public init() {}

    public var isEmpty: Bool { count == 0 }

    public subscript(id: UInt64) -> Inode? {
        get { slot(of: id).map { unpack(records[Int($0)]) } }
        set {
            if let inode = newValue {
                precondition(inode.id == id && id != 0, "an inode is stored under its own number")
                put(inode)
            } else {
                remove(id)
            }
        }
    }

    public func contains(_ id: UInt64) -> Bool { slot(of: id) != nil }

    /// The kind of inode `id` without unpacking its record.
    public func kind(of id: UInt64) -> Inode.Kind? {
        slot(of: id).flatMap { Inode.Kind(rawValue: records[Int($0)].kind) }
    }

    /// The numbers of the records whose kind, link count and crash mark pass `test`, found without
    /// unpacking any record (a check over a million files at every open).
    public func ids(where test: (_ kind: Inode.Kind, _ linkCount: UInt32, _ needsCheck: Bool) -> Bool) -> [UInt64] {
        var found: [UInt64] = []
        for p in records {
            if p.id != 0, let kind = Inode.Kind(rawValue: p.kind),
                test(kind, p.linkCount, p.flags & Packed.needsCheck != 0)
            {
                found.append(p.id)
            }
        }
        return found
    }

    public var keys: [UInt64] {
        var ids: [UInt64] = []
        ids.reserveCapacity(count)
        for p in records where p.id != 0 { ids.append(p.id) }
        return ids
    }

    /// The records one at a time (unpacked as they are reached, never all at once).
    public var values: Values { Values(table: self) }

    public struct Values: Sequence {
        fileprivate let table: InodeTable
        public func makeIterator() -> AnyIterator<Inode> {
            var inner = table.makeIterator()
            return AnyIterator { inner.next()?.value }
        }
    }

    public struct Iterator: IteratorProtocol {
        fileprivate let table: InodeTable
        fileprivate var position = 0

        public mutating func next() -> (key: UInt64, value: Inode)? {
            while position < table.records.count {
                let packed = table.records[position]
                position += 1
                if packed.id != 0 { return (packed.id, table.unpack(packed)) }
            }
            return nil
        }
    }

    public func makeIterator() -> Iterator { Iterator(table: self) }

    public static func == (a: InodeTable, b: InodeTable) -> Bool {
        guard a.count == b.count else { return false }
        return a.allSatisfy { b[$0.key] == $0.value }
    }

    // MARK: Slots

    private func slot(of id: UInt64) -> UInt32? {
        if id < UInt64(slotByID.count) {
            let s = slotByID[Int(id)]
            return s == UInt32.max ? nil : s
        }
        return distantSlots[id]
    }

    private mutating func put(_ inode: Inode) {
        if let s = slot(of: inode.id) {
            records[Int(s)] = pack(inode, replacing: records[Int(s)].flags & Packed.hasExtras != 0)
            return
        }
        let packed = pack(inode, replacing: false)
        let s: UInt32
        if let free = freeSlots.popLast() {
            s = free
            records[Int(s)] = packed
        } else {
            s = UInt32(records.count)
            records.append(packed)
        }
        count += 1
        // Within reach of the numbers already used: grow the array; far beyond them: the dictionary.
        if inode.id < UInt64(Swift.max(slotByID.count * 2, 1 << 16)) {
            if inode.id >= UInt64(slotByID.count) {
                while slotByID.count <= Int(inode.id) { slotByID.append(UInt32.max) }
            }
            slotByID[Int(inode.id)] = s
        } else {
            distantSlots[inode.id] = s
        }
    }

    private mutating func remove(_ id: UInt64) {
        guard let s = slot(of: id) else { return }
        if id < UInt64(slotByID.count) { slotByID[Int(id)] = UInt32.max } else { distantSlots[id] = nil }
        if records[Int(s)].flags & Packed.hasExtras != 0 { extras[id] = nil }
        records[Int(s)].id = 0
        count -= 1
        if Int(s) == records.count - 1 { records.removeLast() } else { freeSlots.append(s) }
    }

    // MARK: Packing

    /// `replacing`: the record it replaces had extras (a new record has none to remove).
    private mutating func pack(_ inode: Inode, replacing hadExtras: Bool) -> Packed {
        var flags: UInt8 = inode.needsCheck ? Packed.needsCheck : 0
        var high: UInt64 = 0
        var low: UInt64 = 0
        if inode.blobID.count == 16 {
            flags |= Packed.hasBlobID
            for i in 0..<8 {
                high = high << 8 | UInt64(inode.blobID[i])
                low = low << 8 | UInt64(inode.blobID[8 + i])
            }
        }
        var extra = Extras(
            symlinkTarget: inode.symlinkTarget, extendedAttributes: inode.extendedAttributes, holes: inode.holes,
            deviceNumber: inode.deviceNumber)
        let mime = mimeTypes.number(of: inode.mimeType)
        if mime == nil { extra.mimeType = inode.mimeType }
        if extra.isEmpty {
            if hadExtras { extras[inode.id] = nil }
        } else {
            flags |= Packed.hasExtras
            extras[inode.id] = extra
        }
        return Packed(
            id: inode.id, size: inode.size, accessTime: inode.accessTime, modificationTime: inode.modificationTime,
            changeTime: inode.changeTime, birthTime: inode.birthTime, contentVersion: inode.contentVersion,
            contentSeals: inode.contentSeals, blobHigh: high, blobLow: low, uid: inode.uid, gid: inode.gid,
            linkCount: inode.linkCount, permissions: UInt16(inode.permissions & 0o7777), mimeType: mime ?? 0,
            kind: inode.kind.rawValue, blobLayout: inode.blobLayout, flags: flags)
    }

    private func unpack(_ p: Packed) -> Inode {
        // The kind was valid when packed: records come only from `Inode` values.
        var inode = Inode(
            id: p.id, kind: Inode.Kind(rawValue: p.kind)!, permissions: UInt32(p.permissions), uid: p.uid,
            gid: p.gid, now: p.accessTime)
        inode.linkCount = p.linkCount
        inode.size = p.size
        inode.modificationTime = p.modificationTime
        inode.changeTime = p.changeTime
        inode.birthTime = p.birthTime
        inode.contentVersion = p.contentVersion
        inode.contentSeals = p.contentSeals
        inode.blobLayout = p.blobLayout
        inode.needsCheck = p.flags & Packed.needsCheck != 0
        if p.flags & Packed.hasBlobID != 0 {
            inode.blobID = [UInt8](unsafeUninitializedCapacity: 16) { b, n in
                for i in 0..<8 {
                    b[i] = UInt8(truncatingIfNeeded: p.blobHigh >> (56 - 8 * UInt64(i)))
                    b[8 + i] = UInt8(truncatingIfNeeded: p.blobLow >> (56 - 8 * UInt64(i)))
                }
                n = 16
            }
        }
        inode.mimeType = mimeTypes.name(p.mimeType)
        if p.flags & Packed.hasExtras != 0, let extra = extras[p.id] {
            inode.symlinkTarget = extra.symlinkTarget
            inode.extendedAttributes = extra.extendedAttributes
            inode.holes = extra.holes
            inode.deviceNumber = extra.deviceNumber
            if let mime = extra.mimeType { inode.mimeType = mime }
        }
        return inode
    }
}

/// The distinct MIME types of a vault's files, each stored once and named by its number (a vault has
/// a few dozen; each record would otherwise hold its own copy of a string of 10–70 bytes).
struct MIMETypeTable {
    static let capacity = Int(UInt16.max)
    private var names: [String] = [""]
    private var numbers: [String: UInt16] = ["": 0]
    /// The type asked for last: records come in runs of one type, and comparing a string with itself
    /// (the same storage, as `RecentStrings` hands out) costs less than hashing it.
    private var last: (name: String, number: UInt16) = ("", 0)

    /// The number of `name`, added if new; nil once the table is full.
    mutating func number(of name: String) -> UInt16? {
        if name == last.name { return last.number }
        if let n = numbers[name] {
            last = (name, n)
            return n
        }
        guard names.count < MIMETypeTable.capacity else { return nil }
        let n = UInt16(names.count)
        names.append(name)
        numbers[name] = n
        return n
    }

    func name(_ number: UInt16) -> String { names[Int(number)] }
}
