/// Lower-case hexadecimal, the one encoding of bytes as text in the program (IDs, names of blobs
/// and keychain items, digests in messages).
public enum Hex {
    public static let digits: [UInt8] = Array("0123456789abcdef".utf8)
}

extension Array where Element == UInt8 {
    /// Lower-case hexadecimal.
    public var hex: String {
        let digits = Hex.digits
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for b in self {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public init?(hex: String) {
        let u = Array(hex.utf8)
        guard u.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 97...102: return c - 87
            case 65...70: return c - 55
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let h = nibble(u[i]), let l = nibble(u[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        self = out
    }
}
