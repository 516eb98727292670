/// Keychain failures, in words a person understands. None carries a secret.
public enum KeychainError: Error, Equatable, CustomStringConvertible {
    /// No such item.
    case notFound
    /// The keyring is locked; the item exists but cannot be read now.
    case deviceLocked(hint: String)
    /// A master key must be exactly 32 bytes.
    case invalidKeySize(Int)
    /// No usable backend (no Secret Service and no explicit choice).
    case unavailable(String)
    /// The backend refused or failed the operation.
    case backendFailure(String)
    /// The file keychain's directory or item has an owner or mode that others could use.
    case insecureStorage(String)
    /// A stored item is not in the expected form.
    case corruptItem(String)

    public var description: String {
        switch self {
        case .notFound: return "no such item in the keychain"
        case .deviceLocked(let hint): return "the keyring is locked; \(hint)"
        case .invalidKeySize(let n): return "a master key must be 32 bytes, got \(n)"
        case .unavailable(let why): return "keychain unavailable: \(why)"
        case .backendFailure(let why): return "keychain error: \(why)"
        case .insecureStorage(let why): return "keychain storage is not private: \(why)"
        case .corruptItem(let what): return "keychain item \(what) is corrupt"
        }
    }
}
