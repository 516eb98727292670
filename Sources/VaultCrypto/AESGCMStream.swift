internal import COpenSSL
import Glibc

/// One AES-256-GCM box sealed or opened piece by piece, for boxes too large to hold twice in memory
/// (the index snapshot of a vault of a million files is about 170 MB). The box is the same
/// `ciphertext ‖ tag` that `AESGCM.seal` makes in one call.
///
/// Opening in pieces hands out plaintext before the tag is checked: a caller must treat everything
/// it got as untrusted, and use none of it, until `finishOpening` has returned.
public final class AESGCMStream {
    private let ctx: OpaquePointer
    private let sealing: Bool
    private var finished = false

    /// Starts sealing (`sealing`) or opening a box under `key` and `nonce`, with `aad` authenticated.
    public init(sealing: Bool, key: SecureBytes, nonce: [UInt8], authenticating aad: [UInt8]) throws {
        guard key.count == AESGCM.keySize else {
            throw CryptoError.invalidLength(what: "AES-256-GCM key", expected: AESGCM.keySize, actual: key.count)
        }
        guard nonce.count == AESGCM.nonceSize else {
            throw CryptoError.invalidLength(what: "GCM nonce", expected: AESGCM.nonceSize, actual: nonce.count)
        }
        guard let ctx = EVP_CIPHER_CTX_new() else {
            throw CryptoError.openSSLFailure(operation: "EVP_CIPHER_CTX_new", code: 0)
        }
        self.ctx = ctx
        self.sealing = sealing
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) else {
            throw CryptoError.openSSLFailure(operation: "EVP_CIPHER_fetch", code: 0)
        }
        defer { EVP_CIPHER_free(cipher) }
        try key.withUnsafeBytes { k in
            try check(
                EVP_CipherInit_ex(
                    ctx, cipher, nil, k.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce, sealing ? 1 : 0),
                "EVP_CipherInit_ex")
        }
        if !aad.isEmpty {
            var outl: Int32 = 0
            try check(EVP_CipherUpdate(ctx, nil, &outl, aad, Int32(aad.count)), "GCM AAD")
        }
    }

    /// Frees the context, which cleanses the key schedule.
    deinit { EVP_CIPHER_CTX_free(ctx) }

    /// Encrypts (sealing) or decrypts (opening) `input` into `output`, which has the same length; the
    /// two may be the same memory.
    public func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws {
        precondition(!finished && output.count == input.count)
        guard input.count > 0 else { return }
        var outl: Int32 = 0
        try check(
            EVP_CipherUpdate(
                ctx, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &outl,
                input.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(input.count)),
            sealing ? "GCM encrypt" : "GCM decrypt")
        guard Int(outl) == input.count else {
            throw CryptoError.openSSLFailure(operation: "GCM update returned a short piece", code: 0)
        }
    }

    /// Ends a seal: the tag to put after the ciphertext.
    public func finishSealing() throws -> [UInt8] {
        precondition(sealing && !finished)
        finished = true
        var finl: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        try check(EVP_CipherFinal_ex(ctx, &scratch, &finl), "GCM encrypt final")
        var tag = [UInt8](repeating: 0, count: AESGCM.tagSize)
        try check(COpenSSL_gcm_get_tag(ctx, Int32(AESGCM.tagSize), &tag), "GCM get tag")
        return tag
    }

    /// Ends an open: throws `authenticationFailure` unless `tag` is the box's tag, in which case every
    /// piece handed out was authentic.
    public func finishOpening(tag: [UInt8]) throws {
        precondition(!sealing && !finished)
        finished = true
        guard tag.count == AESGCM.tagSize else { throw CryptoError.authenticationFailure }
        var copy = tag
        try check(COpenSSL_gcm_set_tag(ctx, Int32(AESGCM.tagSize), &copy), "GCM set tag")
        var finl: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        guard EVP_CipherFinal_ex(ctx, &scratch, &finl) == 1 else {
            ERR_clear_error()
            throw CryptoError.authenticationFailure
        }
    }
}
