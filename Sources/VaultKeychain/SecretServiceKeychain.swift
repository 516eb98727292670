internal import CSecretService
import Glibc
import VaultCrypto

/// The Secret Service backend (GNOME Keyring, KeePassXC, KWallet) through libsecret: items in the
/// default collection under the `org.vaultaire.Secret` schema, attributes `account`, `kind`, `vault`.
/// A locked collection is `deviceLocked`; it is unlocked through the service's prompt only when the
/// command runs on a terminal.
public final class SecretServiceKeychain: KeychainBackend {
    public let name = "Secret Service"
    private let mayPrompt: Bool

    public static let unlockHint =
        "unlock your login keyring (log in to the desktop, or run 'gnome-keyring-daemon --unlock' with your login password on standard input) and try again"

    public init(mayPrompt: Bool = isatty(0) == 1) { self.mayPrompt = mayPrompt }

    private func check(_ status: Int32, _ message: UnsafeMutablePointer<CChar>?) throws {
        let text = message.map { String(cString: $0) } ?? ""
        free(message)
        switch status {
        case Int32(VAULTAIRE_SECRET_OK.rawValue): return
        case Int32(VAULTAIRE_SECRET_NOT_FOUND.rawValue): throw KeychainError.notFound
        case Int32(VAULTAIRE_SECRET_LOCKED.rawValue):
            throw KeychainError.deviceLocked(hint: SecretServiceKeychain.unlockHint)
        case Int32(VAULTAIRE_SECRET_UNAVAILABLE.rawValue):
            throw KeychainError.unavailable(
                "\(text); start or unlock a Secret Service keyring, or choose the file keychain with --keychain file or VAULTAIRE_KEYCHAIN=file"
            )
        case Int32(VAULTAIRE_SECRET_TOO_LARGE.rawValue): throw KeychainError.corruptItem("item")
        default: throw KeychainError.backendFailure(text)
        }
    }

    public func store(_ item: KeychainItem, value: SecureBytes) throws {
        var message: UnsafeMutablePointer<CChar>?
        let status = value.withUnsafeBytes { bytes in
            vaultaire_secret_store(
                item.account, item.kind, item.vaultID ?? "", "Vaultaire \(item.kind)",
                bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, mayPrompt ? 1 : 0, &message)
        }
        try check(status, message)
    }

    public func get(_ item: KeychainItem) throws -> SecureBytes {
        let buffer = SecureBytes(count: 4096)
        var length = 0
        var message: UnsafeMutablePointer<CChar>?
        let status = buffer.withUnsafeMutableBytes { out in
            vaultaire_secret_lookup(
                item.account, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, &length,
                mayPrompt ? 1 : 0, &message)
        }
        try check(status, message)
        return buffer.slice(0..<length)
    }

    /// Read-or-create under a lock all of this user's processes share (the Secret Service has no
    /// create-if-absent of its own: a store replaces), then a re-read, so that concurrent creators
    /// all end up with the first one's value.
    public func createIfAbsent(_ item: KeychainItem, value: SecureBytes) throws -> SecureBytes {
        try CreationLock.holding {
            do { return try get(item) } catch KeychainError.notFound {}
            try store(item, value: value)
            return try get(item)
        }
    }

    public func delete(_ item: KeychainItem) throws {
        var message: UnsafeMutablePointer<CChar>?
        try check(vaultaire_secret_clear(item.account, mayPrompt ? 1 : 0, &message), message)
    }
}
