/// Failures of the cryptographic layer.
public enum CryptoError: Error, Equatable, CustomStringConvertible {
    /// A sealed box did not authenticate: wrong key, or altered ciphertext, tag, nonce or AAD.
    case authenticationFailure
    /// A key, nonce or buffer had the wrong length for the operation.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// OpenSSL reported an internal failure; carries `ERR_get_error()`.
    case openSSLFailure(operation: String, code: UInt)
    /// The system random generator could not deliver bytes.
    case randomUnavailable
    /// A memory scan (tests) could not read /proc/self.
    case scanUnavailable(errno: Int32)

    public var description: String {
        switch self {
        case .authenticationFailure: return "authentication failed (wrong key or altered data)"
        case .invalidLength(let what, let expected, let actual):
            return "\(what) must be \(expected) bytes, got \(actual)"
        case .openSSLFailure(let operation, let code): return "OpenSSL \(operation) failed (error \(code))"
        case .randomUnavailable: return "the system random generator is unavailable"
        case .scanUnavailable(let e): return "cannot read this process's memory map (errno \(e))"
        }
    }
}
