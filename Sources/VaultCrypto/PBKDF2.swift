internal import COpenSSL

/// PBKDF2-HMAC-SHA512 (RFC 8018), through OpenSSL's PKCS5_PBKDF2_HMAC.
public enum PBKDF2 {
    /// Derives `length` bytes from `password` and `salt` into secure storage.
    public static func deriveSHA512(
        password: SecureBytes, salt: [UInt8], iterations: Int, length: Int = 32
    ) throws -> SecureBytes {
        precondition(iterations > 0 && iterations <= Int(Int32.max))
        let out = SecureBytes(count: length)
        try password.withUnsafeBytes { pw in
            try salt.withUnsafeBytes { s in
                try out.withUnsafeMutableBytes { o in
                    try check(
                        PKCS5_PBKDF2_HMAC(
                            pw.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(pw.count),
                            s.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(s.count),
                            Int32(iterations), EVP_sha512(), Int32(length),
                            o.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                        "PKCS5_PBKDF2_HMAC")
                }
            }
        }
        return out
    }
}
