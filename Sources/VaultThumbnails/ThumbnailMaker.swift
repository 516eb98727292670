internal import CVips
import Glibc
import VaultSystem

/// Why no thumbnail was made of an image.
public enum ThumbnailError: Error, CustomStringConvertible, Equatable {
    /// Not one of the formats in `ImageKind` (or libvips has no loader for it here).
    case notAnImage
    /// More pixels than `ThumbnailMaker.maximumPixels`: skipped, not decoded.
    case tooLarge(width: Int, height: Int)
    /// The decoder refused it (corrupt or truncated data), with libvips' reason.
    case undecodable(String)
    case libvipsUnavailable

    public var description: String {
        switch self {
        case .notAnImage: return "not an image of a supported format"
        case .tooLarge(let w, let h):
            return "image of \(w)×\(h) pixels exceeds the \(ThumbnailMaker.maximumPixels / 1_000_000)-megapixel limit"
        case .undecodable(let why): return "image cannot be decoded: \(why)"
        case .libvipsUnavailable: return "libvips could not be started"
        }
    }
}

/// Makes the two freedesktop sizes of thumbnail from an image in memory, with libvips: shrink-on-load
/// (JPEG decodes at 1/2, 1/4 or 1/8 size; WebP, HEIF and others at the size asked) and sequential
/// access, so memory stays bounded by a few rows of the source, never the whole decoded image. Nothing
/// touches the disk: the source is a buffer, the PNG is a buffer, loaders that might use files are
/// blocked (`vaultaire_vips_start`).
public enum ThumbnailMaker {
    public static let normalSize = 128
    public static let largeSize = 256
    /// Images with more pixels are skipped (the header says so before anything is decoded).
    public static let maximumPixels = 100_000_000

    private static let started: Bool = vaultaire_vips_start() == 0

    /// Whether libvips started (loaded at the first use; this fails if it is not installed or its init fails).
    public static var isAvailable: Bool { started }

    /// The kind of image `data` holds, its dimensions, or why it is none we make thumbnails of.
    public static func probe(_ data: UnsafeRawBufferPointer) throws -> (kind: ImageKind, width: Int, height: Int) {
        guard started else { throw ThumbnailError.libvipsUnavailable }
        guard let kind = ImageKind.sniff(data) else { throw ThumbnailError.notAnImage }
        var loader = [CChar](repeating: 0, count: 64)
        var width: Int32 = 0
        var height: Int32 = 0
        var pages: Int32 = 0
        guard
            vaultaire_vips_probe(data.baseAddress, data.count, &loader, loader.count, &width, &height, &pages) == 0
        else {
            throw ThumbnailError.undecodable(takeError())
        }
        let name = String(decoding: loader.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard kind.loaders.contains(name) else { throw ThumbnailError.notAnImage }
        guard Int(width) * Int(height) <= maximumPixels else {
            throw ThumbnailError.tooLarge(width: Int(width), height: Int(height))
        }
        return (kind, Int(width), Int(height))
    }

    /// The normal (128 px) and large (256 px) PNGs of `data`, longest side at most that size.
    public static func make(_ data: UnsafeRawBufferPointer) throws -> (normal: [UInt8], large: [UInt8]) {
        _ = try probe(data)
        // The source is decoded once: the normal size is made from the large PNG (a decode of 256 px
        // instead of a second one of the whole image, which halved the time per photo).
        let large = try png(data, size: largeSize)
        let normal = try large.withUnsafeBytes { try png($0, size: normalSize) }
        return (normal, large)
    }

    static func png(_ data: UnsafeRawBufferPointer, size: Int) throws -> [UInt8] {
        var out: UnsafeMutableRawPointer?
        var length = 0
        guard vaultaire_vips_thumbnail_png(data.baseAddress, data.count, Int32(size), &out, &length) == 0, let out
        else {
            throw ThumbnailError.undecodable(takeError())
        }
        defer { vaultaire_vips_free(out) }
        return Array(UnsafeRawBufferPointer(start: out, count: length))
    }

    /// libvips' error text for this thread, one line, without the buffer's address or contents.
    static func takeError() -> String {
        var message = [CChar](repeating: 0, count: 512)
        vaultaire_vips_take_error(&message, message.count)
        let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let lines = text.split(separator: "\n").map(String.init)
        return lines.first { !$0.isEmpty } ?? "unknown error"
    }

    /// Frees libvips' state of the calling thread (before a thread that used it ends).
    public static func threadDone() { vaultaire_vips_thread_done() }
}
