internal import COpenSSL

/// SHA-256 over data that arrives in pieces (files too large to hold in memory), for content
/// addressing. Owns one `EVP_MD_CTX`, freed on release; every libcrypto return is checked.
public final class SHA256Stream {
    private let context: OpaquePointer

    public init() throws {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.openSSLFailure(operation: "EVP_MD_CTX_new", code: 0) }
        context = ctx
        do { try check(EVP_DigestInit_ex(ctx, EVP_sha256(), nil), "EVP_DigestInit_ex") } catch {
            EVP_MD_CTX_free(ctx)
            throw error
        }
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds `bytes` to the hash. The corresponding C function is `EVP_DigestUpdate`.
    public func update(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count > 0 else { return }
        try check(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count), "EVP_DigestUpdate")
    }

    public func update(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try update($0) }
    }

    /// The 32-byte digest; the stream cannot be used afterwards. The C function is `EVP_DigestFinal_ex`.
    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        try out.withUnsafeMutableBufferPointer { o in
            try check(EVP_DigestFinal_ex(context, o.baseAddress, &length), "EVP_DigestFinal_ex")
        }
        guard length == 32 else {
            throw CryptoError.invalidLength(what: "SHA-256 digest", expected: 32, actual: Int(length))
        }
        return out
    }

    /// SHA-256 of `bytes` in one call, with every return checked.
    public static func digest(_ bytes: [UInt8]) throws -> [UInt8] {
        let s = try SHA256Stream()
        try s.update(bytes)
        return try s.finish()
    }
}
