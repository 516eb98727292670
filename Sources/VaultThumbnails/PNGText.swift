/// Adds `tEXt` chunks to a PNG, as the Thumbnail Managing Standard asks of a thumbnail (`Thumb::URI`,
/// `Thumb::MTime`, `Thumb::Size`, …). They go right after `IHDR`, which the PNG specification allows
/// for `tEXt` (any place between `IHDR` and `IEND`).
public enum PNGText {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// `png` with one `tEXt` chunk per pair inserted; nil if `png` does not start with a PNG
    /// signature and an `IHDR` chunk. Keys are Latin-1 words (1–79 bytes, no NUL); values must not
    /// hold NUL (URIs and decimal numbers do not).
    public static func inserting(_ pairs: [(key: String, value: String)], into png: [UInt8]) -> [UInt8]? {
        // signature (8) | IHDR: length (4) = 13 | "IHDR" | 13 bytes | CRC (4)
        guard png.count >= 33, Array(png[0..<8]) == signature, Array(png[12..<16]) == Array("IHDR".utf8),
            png[8..<12].elementsEqual([0, 0, 0, 13])
        else { return nil }
        var out = Array(png[0..<33])
        for (key, value) in pairs {
            let data = Array(key.utf8) + [0] + Array(value.utf8).filter { $0 != 0 }
            out += chunk(type: Array("tEXt".utf8), data: data)
        }
        out += png[33...]
        return out
    }

    /// length | type | data | CRC-32 of type and data (big-endian), as in the PNG specification.
    static func chunk(type: [UInt8], data: [UInt8]) -> [UInt8] {
        bigEndian(UInt32(data.count)) + type + data + bigEndian(crc32(type + data))
    }

    /// The `tEXt` chunks of a PNG, in order (for tests and `vaultaire thumbnail`).
    public static func texts(of png: [UInt8]) -> [(key: String, value: String)] {
        var result: [(String, String)] = []
        var at = 8
        while at + 12 <= png.count {
            let length = Int(png[at]) << 24 | Int(png[at + 1]) << 16 | Int(png[at + 2]) << 8 | Int(png[at + 3])
            guard at + 12 + length <= png.count else { break }
            let type = String(decoding: png[(at + 4)..<(at + 8)], as: UTF8.self)
            if type == "tEXt" {
                let data = png[(at + 8)..<(at + 8 + length)]
                if let nul = data.firstIndex(of: 0) {
                    result.append(
                        (
                            String(decoding: data[..<nul], as: UTF8.self),
                            String(decoding: data[(nul + 1)...], as: UTF8.self)
                        ))
                }
            }
            at += 12 + length
        }
        return result
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }

    static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = crcTable[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
