internal import COpenSSL
import Glibc

/// AES-256-GCM with a 96-bit nonce and a 128-bit tag. A sealed box is `ciphertext ‖ tag`.
public enum AESGCM {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16

    /// Seals `plaintext`; returns `ciphertext ‖ tag`.
    public static func seal(
        _ plaintext: [UInt8], using key: SecureBytes, nonce: [UInt8], authenticating aad: [UInt8] = []
    ) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + tagSize)
        try plaintext.withUnsafeBytes { pt in
            try out.withUnsafeMutableBytes { o in try run(.seal, pt, key, nonce, aad, o) }
        }
        return out
    }

    /// Opens `ciphertext ‖ tag`; throws `authenticationFailure` and returns nothing on any mismatch.
    public static func open(
        _ sealed: [UInt8], using key: SecureBytes, nonce: [UInt8], authenticating aad: [UInt8] = []
    ) throws -> [UInt8] {
        guard sealed.count >= tagSize else { throw CryptoError.authenticationFailure }
        var out = [UInt8](repeating: 0, count: sealed.count - tagSize)
        try sealed.withUnsafeBytes { s in
            try out.withUnsafeMutableBytes { o in try run(.open, s, key, nonce, aad, o) }
        }
        return out
    }

    /// Opens a sealed key straight into secure storage.
    public static func openSecret(
        _ sealed: [UInt8], using key: SecureBytes, nonce: [UInt8], authenticating aad: [UInt8] = []
    ) throws -> SecureBytes {
        guard sealed.count >= tagSize else { throw CryptoError.authenticationFailure }
        let out = SecureBytes(count: sealed.count - tagSize)
        try sealed.withUnsafeBytes { s in
            try out.withUnsafeMutableBytes { o in try run(.open, s, key, nonce, aad, o) }
        }
        return out
    }

    /// Seals a secret (e.g. wraps a key) without copying it into an ordinary array first.
    public static func sealSecret(
        _ secret: SecureBytes, using key: SecureBytes, nonce: [UInt8], authenticating aad: [UInt8] = []
    ) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: secret.count + tagSize)
        try secret.withUnsafeBytes { pt in
            try out.withUnsafeMutableBytes { o in try run(.seal, pt, key, nonce, aad, o) }
        }
        return out
    }

    private enum Direction { case seal, open }

    private static func run(
        _ direction: Direction, _ input: UnsafeRawBufferPointer, _ key: SecureBytes, _ nonce: [UInt8],
        _ aad: [UInt8], _ output: UnsafeMutableRawBufferPointer
    ) throws {
        try nonce.withUnsafeBytes { n in
            try aad.withUnsafeBytes { a in
                switch direction {
                case .seal: try AESGCMContext.current.seal(input, using: key, nonce: n, authenticating: a, into: output)
                case .open: try AESGCMContext.current.open(input, using: key, nonce: n, authenticating: a, into: output)
                }
            }
        }
    }
}

/// One OpenSSL cipher context, reused across operations; not thread-safe, so each thread has its own
/// (`current`). Reuse saves an allocation and a cipher fetch per chunk on the data path.
public final class AESGCMContext {
    private var ctx: OpaquePointer
    private let cipher: OpaquePointer

    // An EVP_CIPHER fetched once and never freed: OpenSSL's fetched ciphers are immutable and safe to
    // share between threads.
    nonisolated(unsafe) private static let cipherHandle: OpaquePointer = {
        guard let c = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) else { fatalError("OpenSSL lacks AES-256-GCM") }
        return c
    }()

    /// The key whose schedule `ctx` holds (a copy, in secure storage): operations under the same key
    /// as the last one only set a new nonce, instead of expanding the key and GHASH table again.
    private let loadedKey = SecureBytes(count: AESGCM.keySize)
    private var hasKey = false

    public init() {
        guard let ctx = EVP_CIPHER_CTX_new() else { fatalError("out of memory: EVP_CIPHER_CTX_new") }
        self.ctx = ctx
        self.cipher = AESGCMContext.cipherHandle
        AESGCMContext.live.withLock { $0[ObjectIdentifier(self)] = Unmanaged.passUnretained(self) }
    }

    deinit {
        AESGCMContext.live.withLock { $0[ObjectIdentifier(self)] = nil }
        EVP_CIPHER_CTX_free(ctx)
    }

    /// Every thread's context. A context keeps the last key (and its AES schedule, whose first round
    /// keys are the key itself) until it is reset, so locking a vault resets them all.
    private static let live = Locked<[ObjectIdentifier: Unmanaged<AESGCMContext>]>([:])

    /// Clears the keys and key schedules held by all contexts (EVP_CIPHER_CTX_reset cleanses them).
    /// Call when no operation is running, e.g. when a vault is locked.
    public static func wipeAll() {
        live.withLock { contexts in
            for context in contexts.values { context.takeUnretainedValue().forgetKey() }
        }
    }

    private func forgetKey() {
        hasKey = false
        loadedKey.wipe()
        guard EVP_CIPHER_CTX_reset(ctx) != 1 else { return }
        // A reset that fails may have left the key schedule in place: free the context (which
        // cleanses it) and start over with a new one.
        ERR_clear_error()
        EVP_CIPHER_CTX_free(ctx)
        guard let fresh = EVP_CIPHER_CTX_new() else { fatalError("out of memory: EVP_CIPHER_CTX_new") }
        ctx = fresh
    }

    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { raw in
            if let raw { Unmanaged<AESGCMContext>.fromOpaque(raw).release() }
        }
        return key
    }()

    /// This thread's context.
    public static var current: AESGCMContext {
        if let raw = pthread_getspecific(threadKey) {
            return Unmanaged<AESGCMContext>.fromOpaque(raw).takeUnretainedValue()
        }
        let context = AESGCMContext()
        pthread_setspecific(threadKey, Unmanaged.passRetained(context).toOpaque())
        return context
    }

    private func start(_ key: SecureBytes, _ nonce: UnsafeRawBufferPointer, encrypt: Bool) throws {
        guard key.count == AESGCM.keySize else {
            throw CryptoError.invalidLength(what: "AES-256-GCM key", expected: AESGCM.keySize, actual: key.count)
        }
        guard nonce.count == AESGCM.nonceSize else {
            throw CryptoError.invalidLength(what: "GCM nonce", expected: AESGCM.nonceSize, actual: nonce.count)
        }
        let enc: Int32 = encrypt ? 1 : 0
        let iv = nonce.baseAddress!.assumingMemoryBound(to: UInt8.self)
        if hasKey && key.constantTimeEquals(loadedKey) {
            try check(EVP_CipherInit_ex(ctx, nil, nil, nil, iv, enc), "EVP_CipherInit_ex(nonce)")
            return
        }
        hasKey = false
        // AES-GCM's default IV length is the 96-bit nonce used here.
        try key.withUnsafeBytes { k in
            try check(
                EVP_CipherInit_ex(ctx, cipher, nil, k.baseAddress!.assumingMemoryBound(to: UInt8.self), iv, enc),
                "EVP_CipherInit_ex(key)")
            loadedKey.withUnsafeMutableBytes { _ = memcpy($0.baseAddress!, k.baseAddress!, AESGCM.keySize) }
        }
        hasKey = true
    }

    private func feedAAD(_ aad: UnsafeRawBufferPointer) throws {
        guard aad.count > 0 else { return }
        var outl: Int32 = 0
        try check(
            EVP_CipherUpdate(ctx, nil, &outl, aad.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(aad.count)),
            "GCM AAD")
    }

    /// Seals `plaintext` into `output`, which holds exactly `plaintext.count + 16` bytes.
    public func seal(
        _ plaintext: UnsafeRawBufferPointer, using key: SecureBytes, nonce: UnsafeRawBufferPointer,
        authenticating aad: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws {
        precondition(output.count == plaintext.count + AESGCM.tagSize)
        try start(key, nonce, encrypt: true)
        try feedAAD(aad)
        let out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var outl: Int32 = 0
        if plaintext.count > 0 {
            try check(
                EVP_CipherUpdate(
                    ctx, out, &outl, plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(plaintext.count)),
                "GCM encrypt")
        }
        var finl: Int32 = 0
        try check(EVP_CipherFinal_ex(ctx, out + Int(outl), &finl), "GCM encrypt final")
        try check(COpenSSL_gcm_get_tag(ctx, Int32(AESGCM.tagSize), out + plaintext.count), "GCM get tag")
    }

    /// Opens `ciphertext ‖ tag` into `output` (`sealed.count - 16` bytes). On failure `output` is
    /// zeroed before the error is thrown, so unauthenticated plaintext never leaves this function.
    public func open(
        _ sealed: UnsafeRawBufferPointer, using key: SecureBytes, nonce: UnsafeRawBufferPointer,
        authenticating aad: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) throws {
        guard sealed.count >= AESGCM.tagSize else { throw CryptoError.authenticationFailure }
        let ctLen = sealed.count - AESGCM.tagSize
        precondition(output.count == ctLen)
        try start(key, nonce, encrypt: false)
        try feedAAD(aad)
        let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let inp = sealed.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var outl: Int32 = 0
        if ctLen > 0 {
            try check(EVP_CipherUpdate(ctx, out, &outl, inp, Int32(ctLen)), "GCM decrypt")
        }
        var tag = (UInt64(0), UInt64(0))
        _ = withUnsafeMutableBytes(of: &tag) { memcpy($0.baseAddress!, inp + ctLen, AESGCM.tagSize) }
        try withUnsafeMutableBytes(of: &tag) {
            try check(COpenSSL_gcm_set_tag(ctx, Int32(AESGCM.tagSize), $0.baseAddress!), "GCM set tag")
        }
        var finl: Int32 = 0
        let ok = EVP_CipherFinal_ex(ctx, (out ?? UnsafeMutablePointer(mutating: inp)) + Int(outl), &finl)
        if ok != 1 {
            ERR_clear_error()
            if ctLen > 0 { OPENSSL_cleanse(output.baseAddress!, ctLen) }
            throw CryptoError.authenticationFailure
        }
    }
}
