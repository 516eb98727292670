/// Little-endian binary writer for the on-disk structures.
public struct ByteWriter {
    public private(set) var bytes: [UInt8] = []

    /// Hands out what was written so far and starts again empty (for output written in pieces).
    public mutating func takeBytes() -> [UInt8] {
        defer { bytes.removeAll(keepingCapacity: true) }
        return bytes
    }

    public init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    public mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    public mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    public mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    public mutating func raw<C: Collection>(_ v: C) where C.Element == UInt8 { bytes.append(contentsOf: v) }
    /// u32 length, then the bytes.
    public mutating func blob(_ v: [UInt8]) {
        u32(UInt32(v.count))
        bytes.append(contentsOf: v)
    }
    /// u16 length, then UTF-8.
    public mutating func string(_ s: String) {
        let u = Array(s.utf8)
        u16(UInt16(u.count))
        bytes.append(contentsOf: u)
    }
}

/// Bounds-checked reader: every overrun is a `FormatError.malformed`, never a trap.
public struct ByteReader {
    private let bytes: [UInt8]
    public private(set) var offset: Int
    private let what: String
    /// Set when a read wanted more bytes than were left: for a reader over part of a stream, the sign
    /// that more of it is needed (rather than that the bytes are malformed).
    public private(set) var ranOut = false

    public init(_ bytes: [UInt8], what: String, from offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
        self.what = what
    }

    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset == bytes.count }

    private mutating func take(_ n: Int) throws -> ArraySlice<UInt8> {
        guard n >= 0, n <= remaining else {
            ranOut = n >= 0
            throw FormatError.malformed("\(what) ends early")
        }
        defer { offset += n }
        return bytes[offset..<offset + n]
    }

    private mutating func integer<T: FixedWidthInteger>(_: T.Type) throws -> T {
        let size = MemoryLayout<T>.size
        guard size <= remaining else {
            ranOut = true
            throw FormatError.malformed("\(what) ends early")
        }
        let start = offset
        offset += size
        return bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: start, as: T.self)) }
    }

    public mutating func u8() throws -> UInt8 { try integer(UInt8.self) }
    public mutating func u16() throws -> UInt16 { try integer(UInt16.self) }
    public mutating func u32() throws -> UInt32 { try integer(UInt32.self) }
    public mutating func u64() throws -> UInt64 { try integer(UInt64.self) }
    public mutating func i64() throws -> Int64 { Int64(bitPattern: try u64()) }
    public mutating func raw(_ n: Int) throws -> [UInt8] { Array(try take(n)) }

    /// A u32-length-prefixed byte string of at most `limit` bytes.
    public mutating func blob(limit: Int) throws -> [UInt8] {
        let n = Int(try u32())
        guard n <= limit else { throw FormatError.malformed("\(what): field of \(n) bytes exceeds \(limit)") }
        return try raw(n)
    }

    public mutating func string() throws -> String {
        let n = Int(try u16())
        let raw = try take(n)
        guard let s = String(validating: raw, as: UTF8.self) else {
            throw FormatError.malformed("\(what): invalid UTF-8")
        }
        return s
    }

    /// The bytes of a u16-length-prefixed string, unchecked.
    mutating func stringBytes() throws -> ArraySlice<UInt8> {
        let n = Int(try u16())
        return try take(n)
    }

    public func expectEnd() throws {
        guard isAtEnd else { throw FormatError.malformed("\(what) has \(remaining) trailing bytes") }
    }
}

/// The last few strings a decoder read, so that a string repeated record after record is made (and
/// its UTF-8 checked) once and shared.
struct RecentStrings {
    private var recent: [(bytes: [UInt8], string: String)] = []

    mutating func string(from r: inout ByteReader) throws -> String {
        let bytes = try r.stringBytes()
        if bytes.isEmpty { return "" }
        if let hit = recent.firstIndex(where: { $0.bytes.elementsEqual(bytes) }) { return recent[hit].string }
        guard let s = String(validating: bytes, as: UTF8.self) else {
            throw FormatError.malformed("invalid UTF-8")
        }
        if recent.count == 8 { recent.removeFirst() }
        recent.append((Array(bytes), s))
        return s
    }
}
