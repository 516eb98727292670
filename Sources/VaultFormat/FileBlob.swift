import Glibc
import VaultCrypto
import VaultSystem

/// One file's content on disk: a sealed header, then the content as a chunked AES-256-GCM stream.
///
/// Layout 2 (written for new files):
///
///     "VLTF" | 2 u8 | chunk-size log2 u8 | reserved u16 | blob ID [16]                (24 bytes, public)
///     header nonce [12] | sealed header [40 + 16]                                      (92 bytes in all)
///     chunk i slot at 92 + i × (C + 28): nonce [12] | ciphertext | tag [16]
///
/// Header plaintext: content key [32] | content version u64, sealed under the blob's own header key,
/// HMAC-SHA512(file-header key, "vaultaire.v2.blob-header-key" ‖ blob ID)[0..<32]; AAD
/// "vaultaire.v2.file-header" ‖ the 24 public bytes ‖ vault ID ‖ inode ID. Every chunk but the last
/// is stored whole; the last holds only what the padding rule (`paddedLength`) needs, so a small
/// file's blob fits in one host block while the blob's length reveals only the padded size.
///
/// Layout 1 (read and written in place for old files): a 564-byte header (512 bytes of plaintext
/// with the name and MIME type besides key and version, sealed under the file-header key with the
/// label "vaultaire.v1.file-header") and every chunk stored whole.
///
/// Chunk AAD (both): blob ID ‖ chunk index (u64) ‖ final flag (u8) under the file's random content
/// key. Every seal draws a fresh random nonce, so rewriting a chunk in place never reuses a (key,
/// nonce) pair; `seals` counts them for the record's seal count.
public final class FileBlob {
    public static let magic: [UInt8] = Array("VLTF".utf8)
    /// The blob layout this build writes for new blobs (the header has its own version).
    public static let layoutVersion = 2
    public static let headerLabel = "vaultaire.v2.file-header"
    public static let v1HeaderLabel = "vaultaire.v1.file-header"
    public static let blobHeaderKeyLabel = "vaultaire.v2.blob-header-key"
    static let publicSize = 24
    static let v1HeaderPlaintextSize = 512
    static let v2HeaderPlaintextSize = 40
    /// The size of a layout-1 header (also the most a header read needs).
    public static let headerSize = publicSize + 12 + v1HeaderPlaintextSize + 16
    public static let v2HeaderSize = publicSize + 12 + v2HeaderPlaintextSize + 16
    public static let chunkOverhead = 12 + 16
    public static let maximumName = 255
    public static let maximumMIME = 200
    /// The smallest stored length of a non-empty file's plaintext (see `paddedLength`).
    public static let minimumPadded = 256

    public static func headerSize(layout: Int) -> Int { layout >= 2 ? v2HeaderSize : headerSize }

    /// Padmé (Nikitin et al., 2019): rounds `length` up by clearing its low bits so that only
    /// O(log log L) bits of it remain: E = floor(log2 L), S = floor(log2 E) + 1, the low E − S bits
    /// are rounded up. At most about 12 % more.
    public static func padme(_ length: Int) -> Int {
        precondition(length >= 2)
        let e = Int.bitWidth - 1 - length.leadingZeroBitCount
        let s = Int.bitWidth - 1 - e.leadingZeroBitCount + 1
        let lastBits = e - s
        let mask = (1 << lastBits) - 1
        return (length + mask) & ~mask
    }

    /// The stored plaintext length of a layout-2 file of `size` bytes: 0 for an empty file, else
    /// min(ceil(S/C)·C, padme(max(S, 256))). Layout 1 stores ceil(S/C)·C.
    public static func paddedLength(size: Int, chunkSize: Int, layout: Int) -> Int {
        guard size > 0 else { return 0 }
        let whole = (size + chunkSize - 1) / chunkSize * chunkSize
        guard layout >= 2 else { return whole }
        return min(whole, padme(max(size, minimumPadded)))
    }

    public let path: String
    public let blobID: [UInt8]
    public let chunkSize: Int
    /// 1 or 2, from the public bytes (which must match the record's).
    public let layout: Int
    public var slotSize: Int { chunkSize + FileBlob.chunkOverhead }
    /// Where chunk 0's slot starts.
    public var dataStart: Int { FileBlob.headerSize(layout: layout) }
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
    /// Chunk seals made through this object (under `contentKey`), for the record's seal count.
    private let sealCounter = Mutex()
    private var sealsMade: UInt64 = 0
    public var seals: UInt64 { sealCounter.withLock { sealsMade } }

    private init(
        path: String, fd: FileDescriptor, blobID: [UInt8], chunkSize: Int, layout: Int, contentKey: SecureBytes
    ) {
        self.path = path
        self.fd = fd
        self.blobID = blobID
        self.chunkSize = chunkSize
        self.layout = layout
        self.contentKey = contentKey
    }

    static func publicBytes(blobID: [UInt8], chunkSizeLog2: UInt8, layout: Int) -> [UInt8] {
        var w = ByteWriter()
        w.raw(magic)
        w.u8(UInt8(layout))
        w.u8(chunkSizeLog2)
        w.u16(0)
        w.raw(blobID)
        return w.bytes
    }

    static func headerAAD(publicBytes: [UInt8], vaultID: [UInt8], inodeID: UInt64, layout: Int) -> [UInt8] {
        var w = ByteWriter()
        w.raw(Array((layout >= 2 ? headerLabel : v1HeaderLabel).utf8))
        w.raw(publicBytes)
        w.raw(vaultID)
        w.u64(inodeID)
        return w.bytes
    }

    /// The key a layout-2 header is sealed under: one per blob, so that each key's seals are only
    /// that blob's header seals (one per content version, plus crash repairs).
    static func headerKey(for blobID: [UInt8], fileHeaderKey: SecureBytes, layout: Int) throws -> SecureBytes {
        guard layout >= 2 else { return fileHeaderKey }
        let mac = try Digest.hmacSHA512(key: fileHeaderKey, message: Array(blobHeaderKeyLabel.utf8) + blobID)
        defer { mac.wipe() }
        return mac.slice(0..<32)
    }

    /// Creates the blob with a fresh content key and an empty stream, in `layout` (layout 2 unless
    /// an old file is recreated in place). With `deferHeader` the header reaches the disk with the
    /// first write, or at `writeHeldBackHeader`, whichever comes first.
    public static func create(
        file: AnchoredPath, blobID: [UInt8], inodeID: UInt64, vaultID: [UInt8], headerKey: SecureBytes,
        chunkSizeLog2: UInt8, name: String, mimeType: String, version: UInt64,
        deferHeader: Bool = false, reusingEmptyFile: Bool = false, layout: Int = FileBlob.layoutVersion
    ) throws -> FileBlob {
        // With `reusingEmptyFile` the blob's (empty) file is already there and is written in place:
        // removing it first would leave a moment where a durable record names no blob at all.
        let fd = try file.open(flags: reusingEmptyFile ? O_RDWR : O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        let contentKey = try SecureBytes(randomCount: 32)
        let blob = FileBlob(
            path: file.path, fd: fd, blobID: blobID, chunkSize: 1 << Int(chunkSizeLog2), layout: layout,
            contentKey: contentKey)
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

    /// What an authenticated header says besides the key (a layout-2 header holds no name or MIME
    /// type: both are empty).
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
        allowPreviousVersion: Bool = false, layout: Int = FileBlob.layoutVersion
    ) throws -> (FileBlob, HeaderInfo) {
        let fd = try file.open(flags: writable ? O_RDWR : O_RDONLY)
        let size = headerSize(layout: layout)
        var head = [UInt8](repeating: 0, count: size)
        let n = try head.withUnsafeMutableBytes { try fd.read(into: $0, at: 0) }
        guard n == size else { throw FormatError.damaged("file header truncated") }
        // The record names the layout: a blob of the other layout under this name is refused here.
        let expected = publicBytes(blobID: blobID, chunkSizeLog2: chunkSizeLog2, layout: layout)
        guard Array(head[0..<publicSize]) == expected else {
            throw FormatError.damaged("file header does not match its index record")
        }
        let nonce = Array(head[publicSize..<publicSize + 12])
        let sealed = Array(head[publicSize + 12..<size])
        // An ordinary array (secure storage of this size costs system calls on every open), wiped
        // below; it is the only copy besides the key's own secure storage.
        var plain: [UInt8]
        let key = try FileBlob.headerKey(for: blobID, fileHeaderKey: headerKey, layout: layout)
        defer { if layout >= 2 { key.wipe() } }
        do {
            plain = try AESGCM.open(
                sealed, using: key, nonce: nonce,
                authenticating: headerAAD(publicBytes: expected, vaultID: vaultID, inodeID: inodeID, layout: layout))
        } catch CryptoError.authenticationFailure {
            throw FormatError.damaged("file header fails authentication")
        }
        defer { SecureBytes.cleanse(&plain) }
        var r = ByteReader(Array(plain[32...]), what: "file header")
        let found = try r.u64()
        guard found == version || (allowPreviousVersion && found + 1 == version) else {
            throw FormatError.damaged("file header is version \(found), its record says \(version) (blob rolled back?)")
        }
        var name = ""
        var mime = ""
        if layout < 2 {
            name = try r.string()
            mime = try r.string()
        } else {
            try r.expectEnd()
        }
        let contentKey = SecureBytes(copying: plain[0..<32])
        let blob = FileBlob(
            path: file.path, fd: fd, blobID: blobID, chunkSize: 1 << Int(chunkSizeLog2), layout: layout,
            contentKey: contentKey)
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
        let pub = FileBlob.publicBytes(blobID: blobID, chunkSizeLog2: chunkSizeLog2, layout: layout)
        // Everything after the key, in an ordinary writer; the key goes straight from its secure
        // storage into the secure plaintext, so no unwiped array ever holds it.
        let plainSize = layout >= 2 ? FileBlob.v2HeaderPlaintextSize : FileBlob.v1HeaderPlaintextSize
        var w = ByteWriter(capacity: plainSize)
        w.u64(version)
        if layout < 2 {
            w.string(String(decoding: name.utf8.prefix(FileBlob.maximumName), as: UTF8.self))
            w.string(String(decoding: mimeType.utf8.prefix(FileBlob.maximumMIME), as: UTF8.self))
        }
        // Sized once, so nothing reallocates (and leaves a copy behind); wiped after sealing.
        var plain = [UInt8](repeating: 0, count: plainSize)
        defer { SecureBytes.cleanse(&plain) }
        plain.withUnsafeMutableBytes { p in
            contentKey.withUnsafeBytes { k in _ = memcpy(p.baseAddress!, k.baseAddress!, k.count) }
            w.bytes.withUnsafeBytes { rest in
                _ = memcpy(p.baseAddress! + contentKey.count, rest.baseAddress!, rest.count)
            }
        }
        let nonce = try SecureRandom.bytes(12)
        let key = try FileBlob.headerKey(for: blobID, fileHeaderKey: headerKey, layout: layout)
        defer { if layout >= 2 { key.wipe() } }
        let sealed = try AESGCM.seal(
            plain, using: key, nonce: nonce,
            authenticating: FileBlob.headerAAD(publicBytes: pub, vaultID: vaultID, inodeID: inodeID, layout: layout))
        return pub + nonce + sealed
    }

    func offset(ofChunk index: Int) -> Int { dataStart + index * slotSize }

    /// The stored plaintext length of the last chunk of a file of `size` bytes (`chunkSize` in layout 1).
    public func finalChunkLength(size: Int) -> Int {
        let n = (size + chunkSize - 1) / chunkSize
        guard n > 0 else { return 0 }
        return FileBlob.paddedLength(size: size, chunkSize: chunkSize, layout: layout) - (n - 1) * chunkSize
    }

    /// The blob's length on disk for a file of `size` bytes: the header, every chunk's slot, the last
    /// one only as long as its stored plaintext (holes included: they are never written, so the host
    /// keeps them sparse, but the length covers them).
    public func expectedLength(size: Int) -> Int {
        let n = (size + chunkSize - 1) / chunkSize
        guard n > 0 else { return dataStart }
        return offset(ofChunk: n - 1) + FileBlob.chunkOverhead + finalChunkLength(size: size)
    }

    /// The blob's length on disk now.
    public func length() throws -> Int { try fd.size() }

    /// Sets the blob's length (a hole at the end of a file reaches the host as a sparse extension).
    public func setLength(_ length: Int) throws {
        try writeHeldBackHeader()
        try fd.truncate(to: length)
    }

    private func chunkAAD(_ index: Int, final: Bool) -> (UInt64, UInt64, UInt64, UInt8) {
        FileBlob.chunkAAD(blobID: blobID, index: index, final: final)
    }

    /// Chunk `index`'s AAD, blob ID ‖ u64 index ‖ u8 final, as its first 25 bytes in memory: a tuple,
    /// so that sealing a chunk allocates nothing for it.
    static func chunkAAD(blobID: [UInt8], index: Int, final: Bool) -> (UInt64, UInt64, UInt64, UInt8) {
        var a: UInt64 = 0
        var b: UInt64 = 0
        blobID.withUnsafeBytes { raw in
            a = raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
            b = raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        }
        return (a, b, UInt64(index).littleEndian, final ? 1 : 0)
    }

    /// Decrypts chunk `index` into `plaintext` (exactly one chunk). `slot` is scratch of `slotSize`
    /// bytes. With `final`, the chunk is the file's last, stored as `finalLength` bytes of plaintext
    /// (`chunkSize` when nil); the rest of `plaintext` is zeroed. Throws `damaged` if the chunk is
    /// missing or fails authentication; `plaintext` is then zeroed.
    public func readChunk(
        _ index: Int, final: Bool, finalLength: Int? = nil, into plaintext: UnsafeMutableRawBufferPointer,
        scratch slot: UnsafeMutableRawBufferPointer
    ) throws {
        try readChunks(
            from: index, count: 1, finalIndex: final ? index : -1, finalLength: finalLength, into: plaintext,
            scratch: slot)
    }

    /// Reads `count` consecutive chunks with one pread and opens each into `plaintext` (count × chunk size).
    /// The chunk numbered `finalIndex` is expected to carry the final flag and to hold `finalLength`
    /// bytes (`chunkSize` when nil). On any failure the whole of `plaintext` is zeroed before `damaged`
    /// is thrown.
    public func readChunks(
        from first: Int, count: Int, finalIndex: Int, finalLength: Int? = nil,
        into plaintext: UnsafeMutableRawBufferPointer, scratch: UnsafeMutableRawBufferPointer
    ) throws {
        precondition(plaintext.count == count * chunkSize && scratch.count >= count * slotSize)
        guard !keyWiped else { throw FormatError.locked }
        let slots = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<count * slotSize])
        let n = try fd.read(into: slots, at: offset(ofChunk: first))
        do {
            for k in 0..<count {
                let index = first + k
                let stored = index == finalIndex ? (finalLength ?? chunkSize) : chunkSize
                precondition(stored > 0 && stored <= chunkSize)
                guard n >= k * slotSize + FileBlob.chunkOverhead + stored else {
                    throw FormatError.damaged("chunk \(index) missing")
                }
                let slot = UnsafeMutableRawBufferPointer(
                    rebasing: slots[k * slotSize..<k * slotSize + FileBlob.chunkOverhead + stored])
                var aad = chunkAAD(index, final: index == finalIndex)
                let out = UnsafeMutableRawBufferPointer(rebasing: plaintext[k * chunkSize..<(k + 1) * chunkSize])
                do {
                    try withUnsafeBytes(of: &aad) { a in
                        try AESGCMContext.current.open(
                            UnsafeRawBufferPointer(rebasing: slot[12...]), using: contentKey,
                            nonce: UnsafeRawBufferPointer(rebasing: slot[0..<12]),
                            authenticating: UnsafeRawBufferPointer(rebasing: a[0..<25]),
                            into: UnsafeMutableRawBufferPointer(rebasing: out[0..<stored]))
                    }
                } catch CryptoError.authenticationFailure {
                    throw FormatError.damaged("chunk \(index) fails authentication")
                }
                if stored < chunkSize { _ = memset(out.baseAddress! + stored, 0, chunkSize - stored) }
            }
        } catch {
            _ = memset(plaintext.baseAddress!, 0, plaintext.count)
            throw error
        }
    }

    /// Seals `plaintext` (exactly one chunk) as chunk `index` with a fresh nonce and writes it in place;
    /// a final chunk stores only its first `finalLength` bytes (`chunkSize` when nil).
    public func writeChunk(
        _ index: Int, final: Bool, finalLength: Int? = nil, from plaintext: UnsafeRawBufferPointer,
        scratch slot: UnsafeMutableRawBufferPointer
    ) throws {
        try writeChunks(
            from: index, count: 1, finalIndex: final ? index : -1, finalLength: finalLength, from: plaintext,
            scratch: slot)
    }

    /// Seals `count` consecutive chunks (each with a fresh random nonce) and writes them with one pwrite.
    public func writeChunks(
        from first: Int, count: Int, finalIndex: Int, finalLength: Int? = nil, from plaintext: UnsafeRawBufferPointer,
        scratch: UnsafeMutableRawBufferPointer
    ) throws {
        try sealChunks(
            from: first, count: count, finalIndex: finalIndex, finalLength: finalLength, from: plaintext, into: scratch)
        let short = finalIndex == first + count - 1 ? chunkSize - (finalLength ?? chunkSize) : 0
        try writeSealedChunks(
            from: first, count: count, slots: UnsafeRawBufferPointer(scratch), length: count * slotSize - short)
    }

    /// Seals `count` consecutive chunks into slots (nonce ‖ ciphertext ‖ tag), each with a fresh random
    /// nonce, touching nothing on disk. The chunk `finalIndex` gets the final flag and is sealed as its
    /// first `finalLength` bytes (`chunkSize` when nil). Needs no lock: it reads only the blob's fixed
    /// key and ID.
    public func sealChunks(
        from first: Int, count: Int, finalIndex: Int, finalLength: Int? = nil, from plaintext: UnsafeRawBufferPointer,
        into slots: UnsafeMutableRawBufferPointer
    ) throws {
        precondition(plaintext.count == count * chunkSize && slots.count >= count * slotSize)
        guard !keyWiped else { throw FormatError.locked }
        // All the run's nonces from one call to the generator (each call has a fixed cost).
        var nonces = [UInt8](repeating: 0, count: count * 12)
        try nonces.withUnsafeMutableBytes { try SecureRandom.fill($0) }
        sealCounter.withLock { sealsMade += UInt64(count) }
        for k in 0..<count {
            let index = first + k
            let stored = index == finalIndex ? (finalLength ?? chunkSize) : chunkSize
            precondition(stored > 0 && stored <= chunkSize)
            let slot = UnsafeMutableRawBufferPointer(rebasing: slots[k * slotSize..<(k + 1) * slotSize])
            nonces.withUnsafeBytes { _ = memcpy(slot.baseAddress!, $0.baseAddress! + k * 12, 12) }
            var aad = chunkAAD(index, final: index == finalIndex)
            try withUnsafeBytes(of: &aad) { a in
                try AESGCMContext.current.seal(
                    UnsafeRawBufferPointer(rebasing: plaintext[k * chunkSize..<k * chunkSize + stored]),
                    using: contentKey, nonce: UnsafeRawBufferPointer(rebasing: slot[0..<12]),
                    authenticating: UnsafeRawBufferPointer(rebasing: a[0..<25]),
                    into: UnsafeMutableRawBufferPointer(rebasing: slot[12..<12 + stored + 16]))
            }
        }
    }

    /// Writes slots sealed by `sealChunks` in place of chunks `first ..< first + count`, with one
    /// pwrite of `length` bytes (all the slots, less what a short final chunk leaves unused).
    public func writeSealedChunks(
        from first: Int, count: Int, slots: UnsafeRawBufferPointer, length: Int? = nil
    ) throws {
        precondition(slots.count >= count * slotSize)
        let run = UnsafeRawBufferPointer(rebasing: slots[0..<(length ?? count * slotSize)])
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

    /// Wipes the key of a blob written by a rewrite once its data is on disk (the file reopens it).
    public func wipeKeyAfterRewrite() { wipeKey() }

    /// Starts writing chunks `first ..< first + count` to disk without waiting (see `FileDescriptor`).
    public func startWriteback(fromChunk first: Int, count: Int) {
        fd.startWriteback(offset: offset(ofChunk: first), length: count * slotSize)
    }

    /// Reserves host space for the slots of `chunks` (fallocate, the blob's length unchanged).
    public func reserveSpace(chunks: Range<Int>) throws {
        guard !chunks.isEmpty else { return }
        try fd.reserveSpace(offset: offset(ofChunk: chunks.lowerBound), length: chunks.count * slotSize)
    }

    /// Gives the host space of the slots of `chunks` back (they are holes in the file's record now,
    /// so nothing reads them). Where the host cannot punch holes, their old ciphertext stays until
    /// overwritten; returns whether the space was freed.
    @discardableResult
    public func releaseSpace(chunks: Range<Int>) -> Bool {
        guard !chunks.isEmpty else { return true }
        return (try? fd.punchHole(offset: offset(ofChunk: chunks.lowerBound), length: chunks.count * slotSize)) != nil
    }

    /// Cuts (or sparsely extends) the blob to what a file of `size` bytes takes (`expectedLength`).
    public func truncate(toSize size: Int) throws {
        try setLength(expectedLength(size: size))
    }

    public func sync() throws {
        try writeHeldBackHeader()
        try fd.dataSync()
    }
}
