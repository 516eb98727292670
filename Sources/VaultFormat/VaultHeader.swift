import VaultCrypto

/// `vault.header`: the only plaintext-structured file in a vault. It holds the public parameters and
/// three envelopes, each the 32-byte master key sealed with AES-256-GCM:
///
///     "VLTV" | version u16 | vault ID [16] | chunk-size log2 u8 | reserved u8            (prefix, 24 bytes)
///     credential envelope: kind u8 | rows u8 | columns u8 | iterations u32 | salt ID [8] | nonce [12] | sealed [48]
///     recovery envelope:   iterations u32 | salt [32] | nonce [12] | sealed [48]
///     backup envelope:     iterations u32 | nonce [12] | sealed [48]
///
/// Each envelope's AAD is its label, the prefix and its own parameters, so no parameter can be
/// altered without the envelope failing to open. Integers are little-endian.
public struct VaultHeader: Equatable {
    public static let formatVersion = 1
    public static let magic: [UInt8] = Array("VLTV".utf8)
    public static let fileName = "vault.header"
    public static let encodedSize = 24 + (3 + 4 + 8 + 12 + 48) + (4 + 32 + 12 + 48) + (4 + 12 + 48)

    public static let credentialLabel = "vaultaire.v1.credential-envelope"
    public static let recoveryLabel = "vaultaire.v1.recovery-envelope"
    public static let backupLabel = "vaultaire.v1.backup-envelope"
    public static let backupSaltLabel = "vaultaire.v1.backup-key"
    public static let saltIDLabel = "vaultaire.v1.device-salt-id"

    public var vaultID: [UInt8]
    public var chunkSizeLog2: UInt8
    public var credential: CredentialEnvelope
    public var recovery: RecoveryEnvelope
    public var backup: BackupEnvelope

    public var chunkSize: Int { 1 << Int(chunkSizeLog2) }

    public struct CredentialEnvelope: Equatable {
        public var kind: Credential.Kind
        public var patternRows: UInt8
        public var patternColumns: UInt8
        public var iterations: UInt32
        public var saltID: [UInt8]
        public var nonce: [UInt8]
        public var sealed: [UInt8]
    }

    public struct RecoveryEnvelope: Equatable {
        public var iterations: UInt32
        public var salt: [UInt8]
        public var nonce: [UInt8]
        public var sealed: [UInt8]
    }

    public struct BackupEnvelope: Equatable {
        public var iterations: UInt32
        public var nonce: [UInt8]
        public var sealed: [UInt8]
    }

    // MARK: Creating and opening

    /// A new vault's header around a fresh random master key, which is returned with it.
    public static func create(
        credential: Credential, pattern: Pattern?, deviceSalt: SecureBytes, iterations: Int,
        recoveryPhrase: SecureBytes, recoveryIterations: Int,
        chunkSizeLog2: UInt8
    ) throws -> (VaultHeader, SecureBytes) {
        try KDFPolicy.check(iterations, minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        try KDFPolicy.check(recoveryIterations, minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")
        let master = try SecureBytes(randomCount: 32)
        let placeholder = CredentialEnvelope(
            kind: credential.kind, patternRows: 0, patternColumns: 0, iterations: 0,
            saltID: [], nonce: [], sealed: [])
        var header = VaultHeader(
            vaultID: try SecureRandom.bytes(16), chunkSizeLog2: chunkSizeLog2, credential: placeholder,
            recovery: RecoveryEnvelope(
                iterations: UInt32(recoveryIterations), salt: try SecureRandom.bytes(32), nonce: [], sealed: []),
            backup: BackupEnvelope(iterations: UInt32(iterations), nonce: [], sealed: []))
        try header.wrapForCredential(
            master, credential: credential, pattern: pattern, deviceSalt: deviceSalt, iterations: iterations)
        let recoveryKey = try PBKDF2.deriveSHA512(
            password: recoveryPhrase, salt: header.recovery.salt, iterations: recoveryIterations)
        header.recovery.nonce = try SecureRandom.bytes(12)
        header.recovery.sealed = try AESGCM.sealSecret(
            master, using: recoveryKey, nonce: header.recovery.nonce, authenticating: header.recoveryAAD)
        return (header, master)
    }

    /// Seals `master` under a new credential: rewrites the credential and backup envelopes only.
    public mutating func wrapForCredential(
        _ master: SecureBytes, credential: Credential, pattern: Pattern?,
        deviceSalt: SecureBytes, iterations: Int
    ) throws {
        try KDFPolicy.check(iterations, minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        self.credential = CredentialEnvelope(
            kind: credential.kind, patternRows: UInt8(pattern?.rows ?? 0), patternColumns: UInt8(pattern?.columns ?? 0),
            iterations: UInt32(iterations), saltID: try VaultHeader.saltID(of: deviceSalt),
            nonce: try SecureRandom.bytes(12), sealed: [])
        let vaultKey = try VaultHeader.vaultKey(credential: credential, deviceSalt: deviceSalt, iterations: iterations)
        self.credential.sealed = try AESGCM.sealSecret(
            master, using: vaultKey, nonce: self.credential.nonce, authenticating: credentialAAD)
        backup.iterations = UInt32(iterations)
        backup.nonce = try SecureRandom.bytes(12)
        let backupKey = try backupKey(credential: credential)
        backup.sealed = try AESGCM.sealSecret(master, using: backupKey, nonce: backup.nonce, authenticating: backupAAD)
    }

    /// Vault key = PBKDF2-HMAC-SHA512(credential, device salt, iterations).
    public static func vaultKey(credential: Credential, deviceSalt: SecureBytes, iterations: Int) throws -> SecureBytes
    {
        let salt = deviceSalt.withUnsafeBytes { Array($0) }
        return try PBKDF2.deriveSHA512(password: credential.secret, salt: salt, iterations: iterations)
    }

    /// Opens the credential envelope; `deviceMismatch` when the salt is not the one the vault was set up with.
    public func unlock(credential: Credential, deviceSalt: SecureBytes) throws -> SecureBytes {
        try KDFPolicy.check(Int(self.credential.iterations), minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        guard try VaultHeader.saltID(of: deviceSalt) == self.credential.saltID else { throw FormatError.deviceMismatch }
        let key = try VaultHeader.vaultKey(
            credential: credential, deviceSalt: deviceSalt, iterations: Int(self.credential.iterations))
        do {
            return try AESGCM.openSecret(
                self.credential.sealed, using: key, nonce: self.credential.nonce, authenticating: credentialAAD)
        } catch CryptoError.authenticationFailure {
            throw FormatError.wrongCredential
        }
    }

    /// Opens the recovery envelope with the normalized phrase.
    public func unlock(recoveryPhrase: SecureBytes) throws -> SecureBytes {
        try KDFPolicy.check(Int(recovery.iterations), minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")
        let key = try PBKDF2.deriveSHA512(
            password: recoveryPhrase, salt: recovery.salt, iterations: Int(recovery.iterations))
        do {
            return try AESGCM.openSecret(
                recovery.sealed, using: key, nonce: recovery.nonce, authenticating: recoveryAAD)
        } catch CryptoError.authenticationFailure {
            throw FormatError.wrongCredential
        }
    }

    /// Opens the backup envelope with the credential alone (no device salt): for ciphertext backups.
    public func unlockWithBackupKey(credential: Credential) throws -> SecureBytes {
        try KDFPolicy.check(Int(backup.iterations), minimum: KDFPolicy.vaultIterations, what: "backup KDF")
        let key = try backupKey(credential: credential)
        do {
            return try AESGCM.openSecret(backup.sealed, using: key, nonce: backup.nonce, authenticating: backupAAD)
        } catch CryptoError.authenticationFailure {
            throw FormatError.wrongCredential
        }
    }

    /// Backup key = PBKDF2-HMAC-SHA512(credential, SHA-512(label ‖ vault ID)[0..<32], iterations).
    func backupKey(credential: Credential) throws -> SecureBytes {
        let salt = Array(try Digest.sha512(Array(VaultHeader.backupSaltLabel.utf8) + vaultID)[0..<32])
        return try PBKDF2.deriveSHA512(password: credential.secret, salt: salt, iterations: Int(backup.iterations))
    }

    /// A non-secret fingerprint of the device salt, so the wrong machine is told apart from a wrong credential.
    public static func saltID(of salt: SecureBytes) throws -> [UInt8] {
        let bytes = salt.withUnsafeBytes { Array($0) }
        return Array(try Digest.sha256(Array(saltIDLabel.utf8) + bytes)[0..<8])
    }

    // MARK: Encoding

    private var prefix: [UInt8] {
        var w = ByteWriter()
        w.raw(VaultHeader.magic)
        w.u16(UInt16(VaultHeader.formatVersion))
        w.raw(vaultID)
        w.u8(chunkSizeLog2)
        w.u8(0)
        return w.bytes
    }

    private var credentialParameters: [UInt8] {
        var w = ByteWriter()
        w.u8(credential.kind.rawValue)
        w.u8(credential.patternRows)
        w.u8(credential.patternColumns)
        w.u32(credential.iterations)
        w.raw(credential.saltID)
        return w.bytes
    }

    var credentialAAD: [UInt8] { Array(VaultHeader.credentialLabel.utf8) + prefix + credentialParameters }
    var recoveryAAD: [UInt8] {
        var w = ByteWriter()
        w.u32(recovery.iterations)
        w.raw(recovery.salt)
        return Array(VaultHeader.recoveryLabel.utf8) + prefix + w.bytes
    }
    var backupAAD: [UInt8] {
        var w = ByteWriter()
        w.u32(backup.iterations)
        return Array(VaultHeader.backupLabel.utf8) + prefix + w.bytes
    }

    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: VaultHeader.encodedSize)
        w.raw(prefix)
        w.raw(credentialParameters)
        w.raw(credential.nonce)
        w.raw(credential.sealed)
        w.u32(recovery.iterations)
        w.raw(recovery.salt)
        w.raw(recovery.nonce)
        w.raw(recovery.sealed)
        w.u32(backup.iterations)
        w.raw(backup.nonce)
        w.raw(backup.sealed)
        precondition(w.bytes.count == VaultHeader.encodedSize)
        return w.bytes
    }

    public init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes, what: "vault header")
        guard try r.raw(4) == VaultHeader.magic else { throw FormatError.malformed("vault header magic") }
        let version = Int(try r.u16())
        guard version == VaultHeader.formatVersion else { throw FormatError.unsupportedVersion(version) }
        guard bytes.count == VaultHeader.encodedSize else {
            throw FormatError.malformed("vault header size \(bytes.count)")
        }
        vaultID = try r.raw(16)
        chunkSizeLog2 = try r.u8()
        guard (12...20).contains(chunkSizeLog2) else { throw FormatError.malformed("chunk size 2^\(chunkSizeLog2)") }
        // Reserved: must be zero, so no bit of the header can change unnoticed.
        guard try r.u8() == 0 else { throw FormatError.malformed("vault header reserved byte") }
        guard let kind = Credential.Kind(rawValue: try r.u8()) else { throw FormatError.malformed("credential kind") }
        credential = CredentialEnvelope(
            kind: kind, patternRows: try r.u8(), patternColumns: try r.u8(), iterations: try r.u32(),
            saltID: try r.raw(8), nonce: try r.raw(12), sealed: try r.raw(48))
        recovery = RecoveryEnvelope(
            iterations: try r.u32(), salt: try r.raw(32), nonce: try r.raw(12), sealed: try r.raw(48))
        backup = BackupEnvelope(iterations: try r.u32(), nonce: try r.raw(12), sealed: try r.raw(48))
        try r.expectEnd()
        try checkFields()
    }

    /// Every field is in its range before anything uses it: nothing in the header is authenticated
    /// until an envelope opens, and the pattern grid sizes feed arithmetic.
    private func checkFields() throws {
        switch credential.kind {
        case .passphrase:
            guard credential.patternRows == 0, credential.patternColumns == 0 else {
                throw FormatError.malformed("a passphrase vault's pattern grid must be 0×0")
            }
        case .pattern:
            guard Pattern.gridSizes.contains(Int(credential.patternRows)),
                Pattern.gridSizes.contains(Int(credential.patternColumns))
            else {
                throw FormatError.malformed(
                    "pattern grid \(credential.patternColumns)×\(credential.patternRows) (2×2 to 9×9)")
            }
        }
        for (what, count) in [
            ("vault", credential.iterations), ("recovery", recovery.iterations), ("backup", backup.iterations),
        ] {
            guard (KDFPolicy.absoluteMinimum...KDFPolicy.maximum).contains(Int(count)) else {
                throw FormatError.malformed(
                    "\(what) KDF iteration count \(count) (\(KDFPolicy.absoluteMinimum) to \(KDFPolicy.maximum))")
            }
        }
    }

    private init(
        vaultID: [UInt8], chunkSizeLog2: UInt8, credential: CredentialEnvelope, recovery: RecoveryEnvelope,
        backup: BackupEnvelope
    ) {
        self.vaultID = vaultID
        self.chunkSizeLog2 = chunkSizeLog2
        self.credential = credential
        self.recovery = recovery
        self.backup = backup
    }
}
