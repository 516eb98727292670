import Glibc
import VaultCrypto
import VaultSystem

/// Reads a secret from a descriptor to its end, straight into secure storage. Reading to the end,
/// not by the file's size, is what makes pipes, FIFOs, /dev/stdin and a shell's `<(…)` work: their
/// size says nothing of what they hold.
enum SecretStream {
    /// Why a secret could not be read.
    enum Failure: Error {
        /// The source held more than `SecretInput.maximumLength` bytes.
        case tooLong
        /// The source held nothing (or only a newline).
        case empty
        /// A read failed.
        case system(SystemError)
    }

    /// Everything `fd` yields until end of file, at most `limit` bytes, with one trailing newline
    /// removed. The corresponding C function is `read` (not `pread`, which pipes refuse).
    static func readToEnd(_ fd: Int32, limit: Int = SecretInput.maximumLength) throws(Failure) -> SecureBytes {
        let buffer = SecureBytes(count: limit + 1)
        var length = 0
        var failure: Failure?
        buffer.withUnsafeMutableBytes { b in
            while length <= limit {
                let n = Glibc.read(fd, b.baseAddress! + length, limit + 1 - length)
                if n < 0 && errno == EINTR { continue }
                if n < 0 {
                    failure = .system(SystemError(errno: errno, operation: "read"))
                    return
                }
                if n == 0 { return }
                length += n
            }
            failure = .tooLong
        }
        if let failure { throw failure }
        buffer.withUnsafeBytes { if length > 0 && $0[length - 1] == 10 { length -= 1 } }
        guard length > 0 else { throw .empty }
        return buffer.slice(0..<length)
    }
}

extension SecretStream.Failure {
    /// One line saying what went wrong with `source` (never its content).
    func message(_ source: String) -> String {
        switch self {
        case .tooLong: return "\(source) gave more than \(SecretInput.maximumLength) bytes; a credential is shorter"
        case .empty: return "\(source) gave an empty credential"
        case .system(let e): return "cannot read \(source): \(String(cString: strerror(e.errno)))"
        }
    }
}
