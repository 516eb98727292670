internal import COpenSSL

/// Hashes and keyed hashes used for identifiers, checksums and subkey derivation. Every OpenSSL call
/// is checked: a failed hash or HMAC throws instead of handing back zeros.
public enum Digest {
    /// SHA-256 of `data`.
    public static func sha256(_ data: [UInt8]) throws -> [UInt8] { try digest(data, algorithm: "SHA256", length: 32) }

    /// SHA-256 of the bytes in `buffer`, without copying them (for secrets held outside an array).
    public static func sha256(_ buffer: UnsafeRawBufferPointer) throws -> [UInt8] {
        try digest(buffer, algorithm: "SHA256", length: 32)
    }

    /// MD5 of `data`: not for security, only where a standard names files by it (the freedesktop
    /// thumbnail repositories).
    public static func md5(_ data: [UInt8]) throws -> [UInt8] { try digest(data, algorithm: "MD5", length: 16) }

    /// SHA-512 of `data`.
    public static func sha512(_ data: [UInt8]) throws -> [UInt8] { try digest(data, algorithm: "SHA512", length: 64) }

    /// The digest named `algorithm` (an OpenSSL name) of `data`, which must be `length` bytes long.
    static func digest(_ data: [UInt8], algorithm: String, length: Int) throws -> [UInt8] {
        try data.withUnsafeBytes { try digest($0, algorithm: algorithm, length: length) }
    }

    static func digest(_ d: UnsafeRawBufferPointer, algorithm: String, length: Int) throws -> [UInt8] {
        let md = try fetch(algorithm)
        defer { EVP_MD_free(md) }
        var out = [UInt8](repeating: 0, count: length)
        var len: UInt32 = 0
        try out.withUnsafeMutableBytes { o in
            try check(
                EVP_Digest(d.baseAddress, d.count, o.baseAddress!.assumingMemoryBound(to: UInt8.self), &len, md, nil),
                "EVP_Digest(\(algorithm))")
        }
        guard Int(len) == length else {
            throw CryptoError.invalidLength(what: "\(algorithm) digest", expected: length, actual: Int(len))
        }
        return out
    }

    /// HMAC-SHA512 keyed by a secret, into secure storage.
    public static func hmacSHA512(key: SecureBytes, message: [UInt8]) throws -> SecureBytes {
        try hmac(key: key, message: message, algorithm: "SHA512", length: 64)
    }

    /// HMAC-SHA256 keyed by a secret: a MAC tag (not secret) of `message`.
    public static func hmacSHA256(key: SecureBytes, message: [UInt8]) throws -> [UInt8] {
        let tag = try hmac(key: key, message: message, algorithm: "SHA256", length: 32)
        return tag.withUnsafeBytes { Array($0) }
    }

    /// HMAC with the digest named `algorithm`; on any failure the output is wiped and an error thrown.
    static func hmac(key: SecureBytes, message: [UInt8], algorithm: String, length: Int) throws -> SecureBytes {
        let md = try fetch(algorithm)
        defer { EVP_MD_free(md) }
        let out = SecureBytes(count: length)
        var len: UInt32 = 0
        let result = key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                out.withUnsafeMutableBytes { o in
                    HMAC(
                        md, k.baseAddress, Int32(k.count), m.baseAddress?.assumingMemoryBound(to: UInt8.self), m.count,
                        o.baseAddress!.assumingMemoryBound(to: UInt8.self), &len)
                }
            }
        }
        guard result != nil, Int(len) == length else {
            out.wipe()
            let code = ERR_get_error()
            ERR_clear_error()
            throw CryptoError.openSSLFailure(operation: "HMAC(\(algorithm))", code: UInt(code))
        }
        return out
    }

    private static func fetch(_ algorithm: String) throws -> OpaquePointer {
        guard let md = EVP_MD_fetch(nil, algorithm, nil) else {
            let code = ERR_get_error()
            ERR_clear_error()
            throw CryptoError.openSSLFailure(operation: "EVP_MD_fetch(\(algorithm))", code: UInt(code))
        }
        return md
    }
}

/// Key separation: each subkey is the first 32 bytes of HMAC-SHA512(parent, label), with a readable label.
public enum KeyDerivation {
    public static func subkey(of parent: SecureBytes, label: String) throws -> SecureBytes {
        let mac = try Digest.hmacSHA512(key: parent, message: Array(label.utf8))
        defer { mac.wipe() }
        return mac.slice(0..<32)
    }
}
