import Glibc
import VaultCrypto
import VaultSystem

/// One file's content on disk: a sealed header, then the content as a chunked AES-256-GCM stream.
///
///     "VLTF" | version u8 | chunk-size log2 u8 | reserved u16 | blob ID [16]          (24 bytes, public)
///     header nonce [12] | sealed header [512 + 16]
///     chunk 0 slot: nonce [12] | ciphertext [chunk size] | tag [16]
///     chunk 1 slot: …
///
/// Header plaintext (512 bytes): content key [32] | content version u64 | name (u16 length + UTF-8) |
/// MIME type (u16 + UTF-8) | zeros. The content version must match the index record's.
/// Header AAD: "vaultaire.v1.file-header" ‖ the 24 public bytes ‖ vault ID ‖ inode ID (u64), which binds
/// the blob to its index record: swapping two files' blobs fails authentication.
/// Chunk AAD: blob ID ‖ chunk index (u64) ‖ final flag (u8) under the file's own random content key.
/// Every chunk holds a whole chunk of plaintext (the tail beyond the file size is zeros), so the blob's
/// size reveals only the chunk count. Every seal draws a fresh random nonce, so rewriting a chunk in
/// place never reuses a (key, nonce) pair.
public final class FileBlob {
    public static let magic: [UInt8] = Array("VLTF".utf8)
    /// The blob layout this build writes (the header has its own version).
    public static let layoutVersion = 1
    public static let headerLabel = "vaultaire.v1.file-header"
    static let publicSize = 24
    static let headerPlaintextSize = 512
    public static let headerSize = publicSize + 12 + headerPlaintextSize + 16
    public static let chunkOverhead = 12 + 16
    public static let maximumName = 255
    public static let maximumMIME = 200

    public let path: String
    public let blobID: [UInt8]
    public let chunkSize: Int
    public var slotSize: Int { chunkSize + FileBlob.chunkOverhead }
    private let fd: FileDescriptor
    /// The file's random key. Wiped by `wipeKey` when the vault locks, even while handles the kernel
    /// still holds keep this blob alive; after that every seal and open throws `locked`.
    let contentKey: SecureBytes
    /// Set once, by `wipeKey`, while no operation runs (the vault is locking).
    private var keyWiped = false
    /// A new blob's sealed header, held back until the blob is first written (it then goes out with
    /// the first chunks in one system call): a small file's create and close cost one write to the
    /// host, not two. While it is held back the blob is empty on disk. Guarded by `headerLock`.
    private var unwrittenHeader: [UInt8]?
    private let headerLock = Mutex()

    private init(path: String, fd: FileDescriptor, blobID: [UInt8], chunkSize: Int, contentKey: SecureBytes) {
        self.path = path
        self.fd = fd
        self.blobID = blobID
        self.chunkSize = chunkSize
        self.contentKey = contentKey
    }

    static func publicBytes(blobID: [UInt8], chunkSizeLog2: UInt8) -> [UInt8] {
        var w = ByteWriter()
        w.raw(magic)
        w.u8(UInt8(FileBlob.layoutVersion))
        w.u8(chunkSizeLog2)
        w.u16(0)
        w.raw(blobID)
        return w.bytes
    }

    static func headerAAD(publicBytes: [UInt8], vaultID: [UInt8], inodeID: UInt64) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array(headerLabel.utf8))
        w.raw(publicBytes)
        w.raw(vaultID)
        w.u64(inodeID)
        return w.bytes
    }

    /// Creates the blob with a fresh content key and an empty stream. With `deferHeader` the header
    /// reaches the disk with the first write, or at `writeHeldBackHeader`, whichever comes first.
    public static func create(
        file: AnchoredPath, blobID: [UInt8], inodeID: UInt64, vaultID: [UInt8], headerKey: SecureBytes,
        chunkSizeLog2: UInt8, name: String, mimeType: String, version: UInt64,
        deferHeader: Bool = false, reusingEmptyFile: Bool = false
    ) throws -> FileBlob {
        // With `reusingEmptyFile` the blob's (empty) file is already there and is written in place:
        // removing it first would leave a moment where a durable record names no blob at all.
        let fd = try file.open(flags: reusingEmptyFile ? O_RDWR : O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        let contentKey = try SecureBytes(randomCount: 32)
        let blob = FileBlob(
            path: file.path, fd: fd, blobID: blobID, chunkSize: 1 << Int(chunkSizeLog2), contentKey: contentKey)
        let header = try blob.sealedHeader(
            inodeID: inodeID, vaultID: vaultID, headerKey: headerKey, chunkSizeLog2: chunkSizeLog2,
            name: name, mimeType: mimeType, version: version)
        if deferHeader {
            blob.unwrittenHeader = header
        } else {
            do { try fd.write(header, at: 0) } catch {
                // An empty blob would be left for nobody (the disk was full); a reused one stays empty.
                if !reusingEmptyFile { try? file.remove() }
                throw error
            }
        }
        return blob
    }

    /// Whether the blob at `path` holds no bytes at all (a create whose header never reached the disk).
    public static func isEmpty(file: AnchoredPath) throws -> Bool {
        try file.open(flags: O_RDONLY).size() == 0
    }

    /// Writes a held-back header now (nothing if there is none).
    public func writeHeldBackHeader() throws {
        try headerLock.withLock {
            guard let header = unwrittenHeader else { return }
            try fd.write(header, at: 0)
            unwrittenHeader = nil
        }
    }

    /// What an authenticated header says besides the key.
    public struct HeaderInfo {
        public let name: String
        public let mimeType: String
        public let version: UInt64
    }

    /// Opens and authenticates an existing blob's header; its content version must be `version`, or
    /// `version - 1` when `allowPreviousVersion` (a crash between the record and the header update).
    public static func open(
        file: AnchoredPath, blobID: [UInt8], inodeID: UInt64, vaultID: [UInt8], headerKey: SecureBytes,
        chunkSizeLog2: UInt8, writable: Bool, version: UInt64,
        allowPreviousVersion: Bool = false
    ) throws -> (FileBlob, HeaderInfo) {
        let fd = try file.open(flags: writable ? O_RDWR : O_RDONLY)
        var head = [UInt8](repeating: 0, count: headerSize)
        let n = try head.withUnsafeMutableBytes { try fd.read(into: $0, at: 0) }
        guard n == headerSize else { throw FormatError.damaged("file header truncated") }
        let expected = publicBytes(blobID: blobID, chunkSizeLog2: chunkSizeLog2)
        guard Array(head[0..<publicSize]) == expected else {
            throw FormatError.damaged("file header does not match its index record")
        }
        let nonce = Array(head[publicSize..<publicSize + 12])
        let sealed = Array(head[publicSize + 12..<headerSize])
        // An ordinary array (secure storage of this size costs system calls on every open), wiped
        // below; it is the only copy besides the key's own secure storage.
        var plain: [UInt8]
        do {
            plain = try AESGCM.open(
                sealed, using: headerKey, nonce: nonce,
                authenticating: headerAAD(publicBytes: expected, vaultID: vaultID, inodeID: inodeID))
        } catch CryptoError.authenticationFailure {
            throw FormatError.damaged("file header fails authentication")
        }
        defer { SecureBytes.cleanse(&plain) }
        var r = ByteReader(Array(plain[32...]), what: "file header")
        let found = try r.u64()
        guard found == version || (allowPreviousVersion && found + 1 == version) else {
            throw FormatError.damaged("file header is version \(found), its record says \(version) (blob rolled back?)")
        }
        let name = try r.string()
        let mime = try r.string()
        let key = SecureBytes(copying: plain[0..<32])
        let blob = FileBlob(
            path: file.path, fd: fd, blobID: blobID, chunkSize: 1 << Int(chunkSizeLog2), contentKey: key)
        return (blob, HeaderInfo(name: name, mimeType: mime, version: found))
    }

    /// Reseals the header with a new name or MIME type (same content key, fresh nonce).
    public func writeHeader(
        inodeID: UInt64, vaultID: [UInt8], headerKey: SecureBytes, chunkSizeLog2: UInt8,
        name: String, mimeType: String, version: UInt64
    ) throws {
        let header = try sealedHeader(
            inodeID: inodeID, vaultID: vaultID, headerKey: headerKey, chunkSizeLog2: chunkSizeLog2,
            name: name, mimeType: mimeType, version: version)
        try headerLock.withLock {
            try fd.write(header, at: 0)
            unwrittenHeader = nil
        }
    }

    private func sealedHeader(
        inodeID: UInt64, vaultID: [UInt8], headerKey: SecureBytes, chunkSizeLog2: UInt8,
        name: String, mimeType: String, version: UInt64
    ) throws -> [UInt8] {
        guard !keyWiped else { throw FormatError.locked }
        let pub = FileBlob.publicBytes(blobID: blobID, chunkSizeLog2: chunkSizeLog2)
        // Everything after the key, in an ordinary writer; the key goes straight from its secure
        // storage into the secure plaintext, so no unwiped array ever holds it.
        var w = ByteWriter(capacity: FileBlob.headerPlaintextSize)
        w.u64(version)
        w.string(String(decoding: name.utf8.prefix(FileBlob.maximumName), as: UTF8.self))
        w.string(String(decoding: mimeType.utf8.prefix(FileBlob.maximumMIME), as: UTF8.self))
        // Sized once, so nothing reallocates (and leaves a copy behind); wiped after sealing.
        var plain = [UInt8](repeating: 0, count: FileBlob.headerPlaintextSize)
        defer { SecureBytes.cleanse(&plain) }
        plain.withUnsafeMutableBytes { p in
            contentKey.withUnsafeBytes { k in _ = memcpy(p.baseAddress!, k.baseAddress!, k.count) }
            w.bytes.withUnsafeBytes { rest in
                _ = memcpy(p.baseAddress! + contentKey.count, rest.baseAddress!, rest.count)
            }
        }
        let nonce = try SecureRandom.bytes(12)
        let sealed = try AESGCM.seal(
            plain, using: headerKey, nonce: nonce,
            authenticating: FileBlob.headerAAD(publicBytes: pub, vaultID: vaultID, inodeID: inodeID))
        return pub + nonce + sealed
    }

    func offset(ofChunk index: Int) -> Int { FileBlob.headerSize + index * slotSize }

    /// How many whole chunk slots the blob holds on disk.
    public func chunksOnDisk() throws -> Int {
        max(0, (try fd.size() - FileBlob.headerSize) / slotSize)
    }

    /// Bytes of the blob beyond its last whole slot (should be 0).
    public func trailingBytes() throws -> Int {
        max(0, try fd.size() - FileBlob.headerSize) % slotSize
    }

    private func chunkAAD(_ index: Int, final: Bool) -> (UInt64, UInt64, UInt64, UInt8) {
        var a: UInt64 = 0
        var b: UInt64 = 0
        blobID.withUnsafeBytes { raw in
            a = raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
            b = raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        }
        return (a, b, UInt64(index).littleEndian, final ? 1 : 0)
    }

    /// Decrypts chunk `index` into `plaintext` (exactly one chunk). `slot` is scratch of `slotSize` bytes.
    /// Throws `damaged` if the chunk is missing or fails authentication; `plaintext` is then zeroed.
    public func readChunk(
        _ index: Int, final: Bool, into plaintext: UnsafeMutableRawBufferPointer,
        scratch slot: UnsafeMutableRawBufferPointer
    ) throws {
        try readChunks(from: index, count: 1, finalIndex: final ? index : -1, into: plaintext, scratch: slot)
    }

    /// Reads `count` consecutive chunks with one pread and opens each into `plaintext` (count × chunk size).
    /// The chunk numbered `finalIndex` is expected to carry the final flag. On any failure the whole of
    /// `plaintext` is zeroed before `damaged` is thrown.
    public func readChunks(
        from first: Int, count: Int, finalIndex: Int, into plaintext: UnsafeMutableRawBufferPointer,
        scratch: UnsafeMutableRawBufferPointer
    ) throws {
        precondition(plaintext.count == count * chunkSize && scratch.count >= count * slotSize)
        guard !keyWiped else { throw FormatError.locked }
        let slots = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<count * slotSize])
        let n = try fd.read(into: slots, at: offset(ofChunk: first))
        do {
            for k in 0..<count {
                let index = first + k
                guard n >= (k + 1) * slotSize else { throw FormatError.damaged("chunk \(index) missing") }
                let slot = UnsafeMutableRawBufferPointer(rebasing: slots[k * slotSize..<(k + 1) * slotSize])
                var aad = chunkAAD(index, final: index == finalIndex)
                do {
                    try withUnsafeBytes(of: &aad) { a in
                        try AESGCMContext.current.open(
                            UnsafeRawBufferPointer(rebasing: slot[12...]), using: contentKey,
                            nonce: UnsafeRawBufferPointer(rebasing: slot[0..<12]),
                            authenticating: UnsafeRawBufferPointer(rebasing: a[0..<25]),
                            into: UnsafeMutableRawBufferPointer(
                                rebasing: plaintext[k * chunkSize..<(k + 1) * chunkSize]))
                    }
                } catch CryptoError.authenticationFailure {
                    throw FormatError.damaged("chunk \(index) fails authentication")
                }
            }
        } catch {
            _ = memset(plaintext.baseAddress!, 0, plaintext.count)
            throw error
        }
    }

    /// Seals `plaintext` (exactly one chunk) as chunk `index` with a fresh nonce and writes it in place.
    public func writeChunk(
        _ index: Int, final: Bool, from plaintext: UnsafeRawBufferPointer,
        scratch slot: UnsafeMutableRawBufferPointer
    ) throws {
        try writeChunks(from: index, count: 1, finalIndex: final ? index : -1, from: plaintext, scratch: slot)
    }

    /// Seals `count` consecutive chunks (each with a fresh random nonce) and writes them with one pwrite.
    public func writeChunks(
        from first: Int, count: Int, finalIndex: Int, from plaintext: UnsafeRawBufferPointer,
        scratch: UnsafeMutableRawBufferPointer
    ) throws {
        try sealChunks(from: first, count: count, finalIndex: finalIndex, from: plaintext, into: scratch)
        try writeSealedChunks(from: first, count: count, slots: UnsafeRawBufferPointer(scratch))
    }

    /// Seals `count` consecutive chunks into slots (nonce ‖ ciphertext ‖ tag), each with a fresh random
    /// nonce, touching nothing on disk. Needs no lock: it reads only the blob's fixed key and ID.
    public func sealChunks(
        from first: Int, count: Int, finalIndex: Int, from plaintext: UnsafeRawBufferPointer,
        into slots: UnsafeMutableRawBufferPointer
    ) throws {
        precondition(plaintext.count == count * chunkSize && slots.count >= count * slotSize)
        guard !keyWiped else { throw FormatError.locked }
        // All the run's nonces from one call to the generator (each call has a fixed cost).
        var nonces = [UInt8](repeating: 0, count: count * 12)
        try nonces.withUnsafeMutableBytes { try SecureRandom.fill($0) }
        for k in 0..<count {
            let index = first + k
            let slot = UnsafeMutableRawBufferPointer(rebasing: slots[k * slotSize..<(k + 1) * slotSize])
            nonces.withUnsafeBytes { _ = memcpy(slot.baseAddress!, $0.baseAddress! + k * 12, 12) }
            var aad = chunkAAD(index, final: index == finalIndex)
            try withUnsafeBytes(of: &aad) { a in
                try AESGCMContext.current.seal(
                    UnsafeRawBufferPointer(rebasing: plaintext[k * chunkSize..<(k + 1) * chunkSize]),
                    using: contentKey, nonce: UnsafeRawBufferPointer(rebasing: slot[0..<12]),
                    authenticating: UnsafeRawBufferPointer(rebasing: a[0..<25]),
                    into: UnsafeMutableRawBufferPointer(rebasing: slot[12...]))
            }
        }
    }

    /// Writes slots sealed by `sealChunks` in place of chunks `first ..< first + count`, with one pwrite.
    public func writeSealedChunks(from first: Int, count: Int, slots: UnsafeRawBufferPointer) throws {
        precondition(slots.count >= count * slotSize)
        let run = UnsafeRawBufferPointer(rebasing: slots[0..<count * slotSize])
        try headerLock.withLock {
            if let header = unwrittenHeader {
                if first == 0 {
                    try header.withUnsafeBytes { try fd.write($0, then: run, at: 0) }
                } else {
                    try fd.write(header, at: 0)
                    try fd.write(run, at: offset(ofChunk: first))
                }
                unwrittenHeader = nil
            } else {
                try fd.write(run, at: offset(ofChunk: first))
            }
        }
    }

    /// The content key, masked, for a memory scan after lock (see `MemoryScan`).
    public func maskedContentKey(label: String) -> MemoryScan.Masked { MemoryScan.Masked(label: label, contentKey) }

    /// Wipes the content key now (the vault is locking); the blob is unusable afterwards. Call only
    /// while no operation runs on it.
    public func wipeKey() {
        keyWiped = true
        contentKey.wipe()
    }

    /// Starts writing chunks `first ..< first + count` to disk without waiting (see `FileDescriptor`).
    public func startWriteback(fromChunk first: Int, count: Int) {
        fd.startWriteback(offset: offset(ofChunk: first), length: count * slotSize)
    }

    /// Cuts the stream to `chunks` slots.
    public func truncate(toChunks chunks: Int) throws {
        try writeHeldBackHeader()
        try fd.truncate(to: offset(ofChunk: chunks))
    }

    public func sync() throws {
        try writeHeldBackHeader()
        try fd.dataSync()
    }
}
