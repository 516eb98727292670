/// Failures reading or interpreting vault data on disk.
public enum FormatError: Error, Equatable, CustomStringConvertible {
    /// The directory holds no vault header.
    case notAVault(path: String)
    /// The vault's directory does not exist.
    case vaultMissing(path: String)
    /// The vault was written by a format version this build does not read.
    case unsupportedVersion(Int)
    /// A structure ended early or held an impossible value (what, and where).
    case malformed(String)
    /// Authenticated data failed its check: named so `verify` can report it.
    case damaged(String)
    /// The credential (or recovery phrase) did not open the key envelope.
    case wrongCredential
    /// No slot of the vault is this device's (another machine, or a wiped keychain).
    case deviceMismatch
    /// The index is older than the newest generation this device has seen.
    case rollback(seen: UInt64, found: UInt64)
    /// The vault was locked and its keys wiped while a file of it was still open.
    case locked
    /// A KDF iteration count below the floor, without the testing override.
    case weakKDF(what: String, iterations: Int, minimum: Int)

    public var description: String {
        switch self {
        case .notAVault(let path): return "\(path) is not a Vaultaire vault (no vault.header)"
        case .vaultMissing(let path): return "vault \(path) does not exist (no such local directory)"
        case .unsupportedVersion(let v):
            return
                "unsupported vault format version \(v) (this build reads versions \(VaultHeader.versionsRead.map(String.init).joined(separator: " and ")))"
        case .malformed(let what): return "vault data malformed: \(what)"
        case .damaged(let what): return "vault damaged: \(what)"
        case .wrongCredential: return "wrong credential"
        case .deviceMismatch:
            return
                "this device has no slot in this vault (it was set up on another machine, or this keychain was reset): enrol it with 'vaultaire recover' and the recovery phrase"
        case .rollback(let seen, let found):
            return "vault index rolled back: this device last saw generation \(seen), the vault holds \(found) "
                + "(if you restored an older copy on purpose, open it once with --accept-rollback)"
        case .locked: return "the vault is locked (its keys are wiped)"
        case .weakKDF(let what, let iterations, let minimum):
            return
                "\(what) iterations \(iterations) are below the minimum \(minimum) (set VAULTAIRE_ALLOW_WEAK_KDF=1 only for tests)"
        }
    }
}
