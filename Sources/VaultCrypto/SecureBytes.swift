internal import COpenSSL
import Glibc

/// A fixed-size buffer for key material: page-aligned, mlock()ed, excluded from core dumps,
/// wiped with OPENSSL_cleanse when released, compared in constant time, never printed.
///
/// Copies that Swift makes of bytes handed *in* (an `[UInt8]` passed to `init(copying:)`) are
/// outside this type's reach; callers wipe their own arrays where they can.
public final class SecureBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let count: Int
    private let storage: UnsafeMutableRawPointer
    private let capacity: Int
    private let locked: Bool
    /// Small secrets share locked pages (see SecretSlab); larger ones get pages of their own.
    private let fromSlab: Bool

    /// A zero-filled secret of `count` bytes.
    public init(count: Int) {
        precondition(count >= 0)
        self.count = count
        if count <= SecretSlab.slotSize {
            let slot = SecretSlab.shared.take()
            storage = slot.pointer
            capacity = SecretSlab.slotSize
            locked = slot.locked
            fromSlab = true
            return
        }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let capacity = (count + page - 1) / page * page
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, page, capacity) == 0, let raw else {
            fatalError("out of memory allocating secure storage")
        }
        memset(raw, 0, capacity)
        // Best effort: a low RLIMIT_MEMLOCK may refuse the lock; the wipe still happens.
        self.locked = mlock(raw, capacity) == 0
        _ = madvise(raw, capacity, MADV_DONTDUMP)
        self.storage = raw
        self.capacity = capacity
        self.fromSlab = false
        SecureBytes.registry.withLock { $0[raw] = capacity }
    }

    /// Every live allocation, so a forked child (the mount daemon) can lock the pages again:
    /// memory locks are not inherited across fork.
    private static let registry = Locked<[UnsafeMutableRawPointer: Int]>([:])

    /// Locks every live secret's pages again (call in a child after fork).
    public static func relockAll() {
        registry.withLock { entries in
            for (p, c) in entries { _ = mlock(p, c) }
        }
        SecretSlab.shared.relockAll()
    }

    /// Whether the pages holding this secret are locked in memory (for tests).
    var isLocked: Bool { locked }

    /// A secret holding a copy of `bytes`.
    public convenience init<Bytes: Collection>(copying bytes: Bytes) where Bytes.Element == UInt8 {
        self.init(count: bytes.count)
        let target = storage.assumingMemoryBound(to: UInt8.self)
        var i = 0
        for b in bytes {
            target[i] = b
            i += 1
        }
    }

    /// A secret of `count` bytes from the CSPRNG.
    public convenience init(randomCount count: Int) throws {
        self.init(count: count)
        try SecureRandom.fill(UnsafeMutableRawBufferPointer(start: storage, count: count))
    }

    deinit {
        OPENSSL_cleanse(storage, capacity)
        if fromSlab {
            SecretSlab.shared.give(back: SecretSlab.Slot(pointer: storage, locked: locked))
            return
        }
        SecureBytes.registry.withLock { $0[storage] = nil }
        if locked { munlock(storage, capacity) }
        free(storage)
    }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: storage, count: count))
    }

    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: storage, count: count))
    }

    /// A new secret holding bytes `range` of this one.
    public func slice(_ range: Range<Int>) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count)
        let out = SecureBytes(count: range.count)
        _ = out.withUnsafeMutableBytes { dst in
            memcpy(dst.baseAddress!, storage + range.lowerBound, range.count)
        }
        return out
    }

    /// Zeroes the contents now, before release.
    public func wipe() { OPENSSL_cleanse(storage, capacity) }

    /// Zeroes memory outside this type that held a secret (OPENSSL_cleanse: not optimized away).
    public static func cleanse(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        OPENSSL_cleanse(base, buffer.count)
    }

    /// Zeroes an ordinary array that held a secret, in place.
    public static func cleanse(_ array: inout [UInt8]) {
        array.withUnsafeMutableBytes { cleanse($0) }
    }

    /// Constant-time equality (CRYPTO_memcmp); lengths are not secret.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return other.withUnsafeBytes { CRYPTO_memcmp(storage, $0.baseAddress!, count) == 0 }
    }

    /// Constant-time comparison with non-secret-held bytes (e.g. a candidate under test).
    public func constantTimeEquals(_ bytes: [UInt8]) -> Bool {
        guard count == bytes.count else { return false }
        return bytes.withUnsafeBytes { CRYPTO_memcmp(storage, $0.baseAddress!, count) == 0 }
    }

    public var description: String { "SecureBytes(\(count) bytes, redacted)" }
    public var debugDescription: String { description }
}

extension SecureBytes: Equatable {
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool { lhs.constantTimeEquals(rhs) }
}
