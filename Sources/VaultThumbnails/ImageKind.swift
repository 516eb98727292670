/// The image formats thumbnails are made of, told by their first bytes (never by the name: a file
/// named `.jpg` may hold anything, and a photo may be named anything).
public enum ImageKind: String, Sendable, CaseIterable {
    case jpeg, png, webp, gif, tiff, heif

    /// How many leading bytes `sniff` needs at most.
    public static let prefixLength = 16

    public static func sniff(_ b: UnsafeRawBufferPointer) -> ImageKind? {
        func starts(_ bytes: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + bytes.count && bytes.indices.allSatisfy { b[offset + $0] == bytes[$0] }
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .webp }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) { return .tiff }
        // ISO base media: a box "ftyp" whose major brand is one of HEIF's (AVIF is HEIF with AV1).
        if starts(Array("ftyp".utf8), at: 4) {
            let brands = ["heic", "heix", "hevc", "heim", "heis", "mif1", "msf1", "avif"]
            if brands.contains(where: { starts(Array($0.utf8), at: 8) }) { return .heif }
        }
        return nil
    }

    /// The libvips loaders each kind may be read by; anything else libvips offers is refused.
    var loaders: [String] {
        switch self {
        case .jpeg: return ["VipsForeignLoadJpegBuffer"]
        case .png: return ["VipsForeignLoadPngBuffer"]
        case .webp: return ["VipsForeignLoadWebpBuffer"]
        case .gif: return ["VipsForeignLoadNsgifBuffer", "VipsForeignLoadGifBuffer"]
        case .tiff: return ["VipsForeignLoadTiffBuffer"]
        case .heif: return ["VipsForeignLoadHeifBuffer"]
        }
    }
}
