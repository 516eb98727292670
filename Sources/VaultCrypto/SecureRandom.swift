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
}
