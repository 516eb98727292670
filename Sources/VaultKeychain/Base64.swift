import VaultCrypto

/// Standard base64 (RFC 4648, with padding) between secure buffers, so a key's text form also
/// lives in wiping storage.
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ input: SecureBytes) -> SecureBytes {
        let out = SecureBytes(count: (input.count + 2) / 3 * 4)
        input.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                var o = 0
                var i = 0
                while i < src.count {
                    let b0 = UInt32(src[i])
                    let b1 = i + 1 < src.count ? UInt32(src[i + 1]) : 0
                    let b2 = i + 2 < src.count ? UInt32(src[i + 2]) : 0
                    let v = b0 << 16 | b1 << 8 | b2
                    dst[o] = alphabet[Int(v >> 18 & 63)]
                    dst[o + 1] = alphabet[Int(v >> 12 & 63)]
                    dst[o + 2] = i + 1 < src.count ? alphabet[Int(v >> 6 & 63)] : 61
                    dst[o + 3] = i + 2 < src.count ? alphabet[Int(v & 63)] : 61
                    i += 3
                    o += 4
                }
            }
        }
        return out
    }

    /// Decodes; nil on any character outside the alphabet or bad padding.
    public static func decode(_ input: SecureBytes) -> SecureBytes? {
        input.withUnsafeBytes { src -> SecureBytes? in
            guard src.count % 4 == 0 else { return nil }
            var pad = 0
            if src.count >= 1 && src[src.count - 1] == 61 { pad += 1 }
            if src.count >= 2 && src[src.count - 2] == 61 { pad += 1 }
            let out = SecureBytes(count: src.count / 4 * 3 - pad)
            let ok = out.withUnsafeMutableBytes { dst -> Bool in
                var o = 0
                var i = 0
                while i < src.count {
                    var v: UInt32 = 0
                    for k in 0..<4 {
                        let c = src[i + k]
                        let d: UInt32
                        switch c {
                        case 65...90: d = UInt32(c - 65)
                        case 97...122: d = UInt32(c - 71)
                        case 48...57: d = UInt32(c + 4)
                        case 43: d = 62
                        case 47: d = 63
                        case 61 where i + k >= src.count - pad: d = 0
                        default: return false
                        }
                        v = v << 6 | d
                    }
                    for k in 0..<3 where o + k < dst.count { dst[o + k] = UInt8(v >> (16 - 8 * UInt32(k)) & 255) }
                    o += 3
                    i += 4
                }
                return true
            }
            return ok ? out : nil
        }
    }
}
