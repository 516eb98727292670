import Glibc
import VaultCrypto
import VaultSystem

/// A device's cache file that only a holder of its key can have written: the contents, then an
/// HMAC-SHA256 of them under that key. A file someone else wrote fails `open` and is ignored by its
/// reader; losing one only costs time. Kept in a 0700 directory, 0600, replaced atomically.
public enum AuthenticatedCacheFile {
    /// The sealed bytes: `contents` followed by its HMAC under `key`.
    public static func seal(_ contents: [UInt8], key: SecureBytes) throws -> [UInt8] {
        contents + (try Digest.hmacSHA256(key: key, message: contents))
    }

    /// The contents of `bytes` if its HMAC under `key` checks (constant-time); throws otherwise.
    /// `minimum` is the shortest contents that can parse, `what` names the file in errors.
    public static func open(_ bytes: [UInt8], key: SecureBytes, minimum: Int, what: String) throws -> [UInt8] {
        guard bytes.count >= minimum + 32 else { throw FormatError.malformed(what) }
        let contents = Array(bytes[..<(bytes.count - 32)])
        let mac = SecureBytes(copying: bytes[(bytes.count - 32)...])
        guard mac.constantTimeEquals(try Digest.hmacSHA256(key: key, message: contents)) else {
            throw FormatError.malformed("\(what) authentication")
        }
        return contents
    }

    /// Replaces `path` in `directory` (made 0700 if missing) with `bytes`, atomically and durably.
    public static func write(_ bytes: [UInt8], to path: String, in directory: String) throws {
        let old = umask(0o077)
        defer { umask(old) }
        try FileSystem.makeDirectories(directory)
        try FileSystem.replaceFile(path, with: bytes)
    }
}
