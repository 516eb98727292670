internal import COpenSSL

/// The CSPRNG: OpenSSL's RAND_bytes, seeded from the kernel.
public enum SecureRandom {
    /// Fills `buffer` with random bytes.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard buffer.count > 0 else { return }
        guard RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1 else {
            throw CryptoError.randomUnavailable
        }
    }

    /// `count` random bytes in an ordinary array (for nonces, salts and identifiers, never keys).
    public static func bytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        try out.withUnsafeMutableBytes { try fill($0) }
        return out
    }

    /// A uniformly random integer in `0..<bound`.
    public static func uniform(_ bound: UInt32) throws -> UInt32 {
        precondition(bound > 0)
        let limit = UInt32.max - UInt32.max % bound
        while true {
            var v: UInt32 = 0
            try withUnsafeMutableBytes(of: &v) { try fill($0) }
            if v < limit { return v % bound }
        }
    }
}
