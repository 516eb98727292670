import VaultCrypto
import VaultSystem

/// What the keychain holds for Vaultaire.
public enum KeychainItem: Equatable {
    /// The random 32-byte device salt, one per machine and user, shared by that user's vaults.
    case deviceSalt
    /// A remembered master key (`--remember`), one per vault.
    case masterKey(vaultID: [UInt8])
    /// The newest index generation this device saw for a vault (rollback protection).
    case generation(vaultID: [UInt8])

    /// The backend's name for the item; contains no secret.
    public var account: String {
        switch self {
        case .deviceSalt: return "device-salt"
        case .masterKey(let id): return "master-key-" + id.hex
        case .generation(let id): return "generation-" + id.hex
        }
    }

    public var kind: String {
        switch self {
        case .deviceSalt: return "device-salt"
        case .masterKey: return "master-key"
        case .generation: return "generation"
        }
    }

    public var vaultID: String? {
        switch self {
        case .deviceSalt: return nil
        case .masterKey(let id), .generation(let id): return id.hex
        }
    }
}

/// A place to keep device-bound secrets. Backends store opaque bytes; they never fall back to
/// another place when they fail.
public protocol KeychainBackend: AnyObject {
    /// A short name for messages ("Secret Service", "file keychain").
    var name: String { get }
    /// Stores `value` under `item`, replacing any earlier value.
    func store(_ item: KeychainItem, value: SecureBytes) throws
    /// The value of `item`; `notFound` if absent.
    func get(_ item: KeychainItem) throws -> SecureBytes
    /// Removes `item`; removing an absent item is no error.
    func delete(_ item: KeychainItem) throws
    /// Stores `value` under `item` only if there is none yet, atomically with respect to every other
    /// process of this user; returns the value stored afterwards (another creator's, if it was first).
    func createIfAbsent(_ item: KeychainItem, value: SecureBytes) throws -> SecureBytes
}

/// The keychain contract of seed 003, on top of a backend: size checks before the backend is touched,
/// base64 in the backend, typed errors.
public final class Keychain {
    public let backend: KeychainBackend

    public init(backend: KeychainBackend) { self.backend = backend }

    public func store(_ item: KeychainItem, _ bytes: SecureBytes) throws { try backend.store(item, value: bytes) }
    public func get(_ item: KeychainItem) throws -> SecureBytes { try backend.get(item) }
    public func delete(_ item: KeychainItem) throws { try backend.delete(item) }

    public func contains(_ item: KeychainItem) throws -> Bool {
        do {
            _ = try backend.get(item)
            return true
        } catch KeychainError.notFound { return false }
    }

    // MARK: Master keys

    public func storeMasterKey(_ key: SecureBytes, for vaultID: [UInt8]) throws {
        guard key.count == 32 else { throw KeychainError.invalidKeySize(key.count) }
        let text = Base64.encode(key)
        defer { text.wipe() }
        try backend.store(.masterKey(vaultID: vaultID), value: text)
    }

    public func getMasterKey(for vaultID: [UInt8]) throws -> SecureBytes {
        let text = try backend.get(.masterKey(vaultID: vaultID))
        defer { text.wipe() }
        guard let key = Base64.decode(text) else { throw KeychainError.corruptItem("master key") }
        guard key.count == 32 else { throw KeychainError.invalidKeySize(key.count) }
        return key
    }

    public func deleteMasterKey(for vaultID: [UInt8]) throws { try backend.delete(.masterKey(vaultID: vaultID)) }

    public func hasMasterKey(for vaultID: [UInt8]) throws -> Bool { try contains(.masterKey(vaultID: vaultID)) }

    // MARK: Device salt and generations

    /// The device salt, created on first use. Creation is first-writer-wins: two commands that find
    /// no salt at the same moment both end up with the same one (the loser's would orphan its vault).
    public func deviceSalt(create: Bool) throws -> SecureBytes {
        let salt: SecureBytes
        do {
            salt = try backend.get(.deviceSalt)
        } catch KeychainError.notFound where create {
            salt = try backend.createIfAbsent(.deviceSalt, value: try SecureBytes(randomCount: 32))
        }
        guard salt.count == 32 else { throw KeychainError.corruptItem("device salt") }
        return salt
    }

    /// The newest index generation recorded for a vault, or nil.
    public func generation(for vaultID: [UInt8]) throws -> UInt64? {
        do {
            let v = try backend.get(.generation(vaultID: vaultID))
            guard v.count == 8 else { throw KeychainError.corruptItem("generation") }
            return v.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        } catch KeychainError.notFound {
            return nil
        }
    }

    public func setGeneration(_ generation: UInt64, for vaultID: [UInt8]) throws {
        let v = SecureBytes(count: 8)
        v.withUnsafeMutableBytes { $0.storeBytes(of: generation.littleEndian, as: UInt64.self) }
        try backend.store(.generation(vaultID: vaultID), value: v)
    }
}
