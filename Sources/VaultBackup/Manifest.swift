import VaultCrypto
import VaultFormat

/// One snapshot: which object holds each of the vault's files at that point. Stored on the remote as
/// `snapshots/<ID, 10 digits>`:
///
///     offset size
///      0      4   magic "VLTM"
///      4      2   backup format version (1)
///      6     16   vault ID
///     22      8   u64 snapshot ID (equals the object's name)
///     30     32   SHA-256 of the backup header object it was made with (keys/<hex>)
///     62     12   nonce
///     74      …   sealed body (AES-256-GCM; ciphertext ‖ 16-byte tag)
///
/// AAD: "vaultaire.backup.v1.manifest" ‖ bytes 0..<62. Key: HMAC-SHA512(master, "vaultaire.backup.v1.manifest-key")[0..<32].
/// Body: i64 created (ns since the epoch) | u64 index generation | u64 files | u64 file bytes |
///       u32 n | n × (string path | u64 size | [32] SHA-256), sorted by path, no path twice.
public struct Manifest: Equatable {
    public static let magic: [UInt8] = Array("VLTM".utf8)
    static let publicSize = 62
    static let maximumSize = 256 << 20
    static let maximumEntries = 1 << 24

    public struct Entry: Equatable {
        /// The file's path inside the vault directory: index/snapshot, index/journal, blobs/XX/…, thumbs/XX/….
        public var path: String
        public var size: UInt64
        public var hash: [UInt8]
        public init(path: String, size: UInt64, hash: [UInt8]) {
            self.path = path
            self.size = size
            self.hash = hash
        }
    }

    public var vaultID: [UInt8]
    public var id: UInt64
    public var headerHash: [UInt8]
    public var created: Int64
    public var generation: UInt64
    public var files: UInt64
    public var fileBytes: UInt64
    public var entries: [Entry]

    public init(
        vaultID: [UInt8], id: UInt64, headerHash: [UInt8], created: Int64, generation: UInt64,
        files: UInt64, fileBytes: UInt64, entries: [Entry]
    ) {
        self.vaultID = vaultID
        self.id = id
        self.headerHash = headerHash
        self.created = created
        self.generation = generation
        self.files = files
        self.fileBytes = fileBytes
        self.entries = entries.sorted { $0.path < $1.path }
    }

    /// Total size of the objects the snapshot needs.
    public var storedBytes: UInt64 { entries.reduce(0) { $0 + $1.size } }

    /// The public part of a sealed manifest, readable without a key (to find the backup header).
    public struct Preamble: Equatable {
        public var vaultID: [UInt8]
        public var id: UInt64
        public var headerHash: [UInt8]
    }

    public static func preamble(of bytes: [UInt8]) throws -> Preamble {
        guard bytes.count >= 6, Array(bytes[0..<4]) == magic else { throw FormatError.malformed("manifest magic") }
        let version = Int(bytes[4]) | Int(bytes[5]) << 8
        guard version == BackupFormat.version else { throw BackupFormatError.unsupportedVersion(version) }
        guard bytes.count >= publicSize + 12 + 16, bytes.count <= maximumSize else {
            throw FormatError.malformed("manifest size \(bytes.count)")
        }
        var r = ByteReader(Array(bytes[6..<publicSize]), what: "manifest")
        return Preamble(vaultID: try r.raw(16), id: try r.u64(), headerHash: try r.raw(32))
    }

    private var publicPart: [UInt8] {
        var w = ByteWriter(capacity: Manifest.publicSize)
        w.raw(Manifest.magic)
        w.u16(UInt16(BackupFormat.version))
        w.raw(vaultID)
        w.u64(id)
        w.raw(headerHash)
        return w.bytes
    }

    /// The sealed manifest, ready to upload.
    public func sealed(master: SecureBytes) throws -> [UInt8] {
        var body = ByteWriter(capacity: 40 + entries.count * 96)
        body.i64(created)
        body.u64(generation)
        body.u64(files)
        body.u64(fileBytes)
        body.u32(UInt32(entries.count))
        for e in entries {
            body.string(e.path)
            body.u64(e.size)
            body.raw(e.hash)
        }
        let key = try BackupFormat.manifestKey(master: master)
        defer { key.wipe() }
        let nonce = try SecureRandom.bytes(12)
        let head = publicPart
        return head + nonce
            + (try AESGCM.seal(
                body.bytes, using: key, nonce: nonce, authenticating: Array(BackupFormat.manifestLabel.utf8) + head))
    }

    /// Authenticates and parses a sealed manifest; `damaged` when it does not authenticate or parse.
    public init(opening bytes: [UInt8], master: SecureBytes) throws {
        let pre = try Manifest.preamble(of: bytes)
        let key = try BackupFormat.manifestKey(master: master)
        defer { key.wipe() }
        let nonce = Array(bytes[Manifest.publicSize..<Manifest.publicSize + 12])
        let aad = Array(BackupFormat.manifestLabel.utf8) + Array(bytes[0..<Manifest.publicSize])
        let body: [UInt8]
        do {
            body = try AESGCM.open(
                Array(bytes[(Manifest.publicSize + 12)...]), using: key, nonce: nonce, authenticating: aad)
        } catch CryptoError.authenticationFailure {
            throw FormatError.damaged("manifest of snapshot \(pre.id) fails authentication")
        }
        var r = ByteReader(body, what: "manifest")
        created = try r.i64()
        generation = try r.u64()
        files = try r.u64()
        fileBytes = try r.u64()
        let n = Int(try r.u32())
        guard n <= Manifest.maximumEntries else { throw FormatError.malformed("manifest: \(n) entries") }
        var list: [Entry] = []
        list.reserveCapacity(n)
        for _ in 0..<n {
            let e = Entry(path: try r.string(), size: try r.u64(), hash: try r.raw(32))
            guard Manifest.isVaultPath(e.path) else {
                throw FormatError.malformed("manifest: path '\(e.path)' is not a vault file")
            }
            if let last = list.last, last.path >= e.path { throw FormatError.malformed("manifest: paths out of order") }
            list.append(e)
        }
        try r.expectEnd()
        vaultID = pre.vaultID
        id = pre.id
        headerHash = pre.headerHash
        entries = list
    }

    /// The only paths a manifest may name (so a restore never writes outside the new vault):
    /// `index/snapshot`, `index/journal`, and `blobs/XX/…` or `thumbs/XX/…` with 2 + 30 lowercase hex digits.
    public static func isVaultPath(_ path: String) -> Bool {
        if path == "index/snapshot" || path == "index/journal" { return true }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "blobs" || parts[0] == "thumbs" else { return false }
        return parts[1].count == 2 && parts[2].count == 30 && RemoteContents.isHex(String(parts[1] + parts[2]))
    }
}
