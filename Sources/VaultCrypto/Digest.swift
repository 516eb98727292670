internal import COpenSSL

/// Hashes and keyed hashes used for identifiers, checksums and subkey derivation.
public enum Digest {
    /// SHA-256 of `data`.
    public static func sha256(_ data: [UInt8]) -> [UInt8] { digest(data, EVP_sha256(), length: 32) }

    /// SHA-512 of `data`.
    public static func sha512(_ data: [UInt8]) -> [UInt8] { digest(data, EVP_sha512(), length: 64) }

    private static func digest(_ data: [UInt8], _ md: OpaquePointer?, length: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        var len: UInt32 = 0
        data.withUnsafeBytes { d in
            out.withUnsafeMutableBytes { o in
                _ = EVP_Digest(d.baseAddress, d.count, o.baseAddress!.assumingMemoryBound(to: UInt8.self), &len, md, nil)
            }
        }
        return out
    }

    /// HMAC-SHA512 keyed by a secret, into secure storage.
    public static func hmacSHA512(key: SecureBytes, message: [UInt8]) -> SecureBytes {
        let out = SecureBytes(count: 64)
        var len: UInt32 = 0
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                out.withUnsafeMutableBytes { o in
                    _ = HMAC(EVP_sha512(), k.baseAddress, Int32(k.count),
                             m.baseAddress?.assumingMemoryBound(to: UInt8.self), m.count,
                             o.baseAddress!.assumingMemoryBound(to: UInt8.self), &len)
                }
            }
        }
        return out
    }
}

/// Key separation: each subkey is the first 32 bytes of HMAC-SHA512(parent, label), with a readable label.
public enum KeyDerivation {
    public static func subkey(of parent: SecureBytes, label: String) -> SecureBytes {
        let mac = Digest.hmacSHA512(key: parent, message: Array(label.utf8))
        return mac.slice(0..<32)
    }
}
