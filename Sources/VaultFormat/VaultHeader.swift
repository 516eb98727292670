import VaultCrypto

/// `vault.header`: the only plaintext-structured file in a vault. Version 2 holds the public
/// parameters, the recovery envelope and one credential envelope per enrolled device (a *slot*, as
/// LUKS has key slots), then a MAC keyed from the master key and a checksum over everything:
///
///     "VLTV" | version u16 | vault ID [16] | chunk-size log2 u8 | reserved u8            (prefix, 24 bytes)
///     recovery envelope: iterations u32 | salt [32] | nonce [12] | sealed [48]
///     slot count u8
///     slot: kind u8 | rows u8 | columns u8 | iterations u32 | salt ID [8] | added i64 |
///           name (u16 length + UTF-8) | nonce [12] | sealed [48]
///     MAC [32]        HMAC-SHA256(header-MAC key, every byte before it)
///     checksum [32]   SHA-256(every byte before it)
///
/// Version 1 (still read, and migrated by the first writable open) had one credential envelope and a
/// backup envelope instead of the slots, and no MAC or checksum. The envelopes' AADs are version 1's in
/// both versions — label, the *envelope prefix* (the prefix with version 1) and the envelope's own
/// parameters — so an envelope moves between a version-1 header, a version-2 header and a backup
/// header unchanged. The version-2 header's version field, slot names and dates are covered by the MAC.
/// Integers are little-endian.
public struct VaultHeader: Equatable {
    /// The version this build writes.
    public static let formatVersion = 2
    /// The versions this build reads.
    public static let versionsRead = [1, 2]
    public static let magic: [UInt8] = Array("VLTV".utf8)
    public static let fileName = "vault.header"
    /// The size of a version-1 header.
    public static let version1Size = 24 + (3 + 4 + 8 + 12 + 48) + (4 + 32 + 12 + 48) + (4 + 12 + 48)
    public static let maximumSlots = 32
    public static let maximumDeviceName = 64

    public static let credentialLabel = "vaultaire.v1.credential-envelope"
    public static let recoveryLabel = "vaultaire.v1.recovery-envelope"
    public static let backupLabel = "vaultaire.v1.backup-envelope"
    public static let backupSaltLabel = "vaultaire.v1.backup-key"
    public static let saltIDLabel = "vaultaire.v1.device-salt-id"
    public static let macLabel = "vaultaire.v2.header-mac"
    public static let backupNonceLabel = "vaultaire.v2.backup-envelope-nonce"

    /// The version the header was read in: 1 for a vault not migrated yet, else 2.
    public private(set) var version: Int
    public var vaultID: [UInt8]
    public var chunkSizeLog2: UInt8
    public var recovery: RecoveryEnvelope
    /// One credential envelope per enrolled device, in the order they were added.
    public private(set) var slots: [DeviceSlot]
    /// A version-1 header's backup envelope. Version 2 keeps none beside the vault (it would let anyone
    /// holding the vault directory guess passphrases without the device salt); backups carry their own.
    public private(set) var legacyBackup: BackupEnvelope?
    /// The stored MAC (version 2; empty for version 1).
    private var mac: [UInt8]
    /// Whether the stored checksum matched the bytes read (always true for a header made here).
    public private(set) var checksumMatches: Bool

    public var chunkSize: Int { 1 << Int(chunkSizeLog2) }

    /// One device's credential envelope: the master key sealed under the vault key that this
    /// device's salt and the credential give.
    public struct DeviceSlot: Equatable {
        /// What the owner calls the device (the hostname by default); at most 64 bytes of UTF-8.
        public var name: String
        public var kind: Credential.Kind
        public var patternRows: UInt8
        public var patternColumns: UInt8
        public var iterations: UInt32
        /// `SHA-256(label ‖ device salt)[0..<8]`: which device's salt the slot needs.
        public var saltID: [UInt8]
        /// When the slot was added or last rewritten, seconds since the Unix epoch.
        public var added: Int64
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

    // MARK: Creating and changing

    /// A new vault's header around a fresh random master key, which is returned with it.
    public static func create(
        credential: Credential, pattern: Pattern?, deviceSalt: SecureBytes, deviceName: String, iterations: Int,
        recoveryPhrase: SecureBytes, recoveryIterations: Int, chunkSizeLog2: UInt8, now: Int64
    ) throws -> (VaultHeader, SecureBytes) {
        let master = try SecureBytes(randomCount: 32)
        let header = try create(
            master: master, vaultID: try SecureRandom.bytes(16), recoverySalt: try SecureRandom.bytes(32),
            recoveryNonce: try SecureRandom.bytes(12), slotNonce: try SecureRandom.bytes(12), credential: credential,
            pattern: pattern, deviceSalt: deviceSalt, deviceName: deviceName, iterations: iterations,
            recoveryPhrase: recoveryPhrase, recoveryIterations: recoveryIterations, chunkSizeLog2: chunkSizeLog2,
            now: now)
        return (header, master)
    }

    /// A new vault's header from given parts instead of random ones, so that docs/FORMAT.md's test
    /// vectors can give a whole header built by this code. Nothing else may call it: a vault's IDs,
    /// salts and nonces must be fresh.
    static func create(
        master: SecureBytes, vaultID: [UInt8], recoverySalt: [UInt8], recoveryNonce: [UInt8], slotNonce: [UInt8],
        credential: Credential, pattern: Pattern?, deviceSalt: SecureBytes, deviceName: String, iterations: Int,
        recoveryPhrase: SecureBytes, recoveryIterations: Int, chunkSizeLog2: UInt8, now: Int64
    ) throws -> VaultHeader {
        try KDFPolicy.check(iterations, minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        try KDFPolicy.check(recoveryIterations, minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")
        var header = VaultHeader(
            version: formatVersion, vaultID: vaultID, chunkSizeLog2: chunkSizeLog2,
            recovery: RecoveryEnvelope(
                iterations: UInt32(recoveryIterations), salt: recoverySalt, nonce: recoveryNonce, sealed: []),
            slots: [], legacyBackup: nil, mac: [], checksumMatches: true)
        try header.sealRecoveryEnvelope(
            master: master, recoveryPhrase: recoveryPhrase, iterations: recoveryIterations, salt: recoverySalt,
            nonce: recoveryNonce)
        try header.setSlot(
            master: master, credential: credential, pattern: pattern, deviceSalt: deviceSalt, name: deviceName,
            iterations: iterations, now: now, nonce: slotNonce)
        return header
    }

    /// Seals `master` under `credential` for the device whose salt is `deviceSalt`: replaces that
    /// device's slot, or adds one. Other devices' slots are kept. The header becomes version 2 (a
    /// version-1 header's backup envelope is dropped) and its MAC is recomputed.
    public mutating func setSlot(
        master: SecureBytes, credential: Credential, pattern: Pattern?, deviceSalt: SecureBytes, name: String,
        iterations: Int, now: Int64
    ) throws {
        try setSlot(
            master: master, credential: credential, pattern: pattern, deviceSalt: deviceSalt, name: name,
            iterations: iterations, now: now, nonce: try SecureRandom.bytes(12))
    }

    /// `setSlot` with a given nonce (fresh from `SecureRandom` but for the test vectors).
    mutating func setSlot(
        master: SecureBytes, credential: Credential, pattern: Pattern?, deviceSalt: SecureBytes, name: String,
        iterations: Int, now: Int64, nonce: [UInt8]
    ) throws {
        try KDFPolicy.check(iterations, minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        try VaultHeader.checkDeviceName(name)
        let saltID = try VaultHeader.saltID(of: deviceSalt)
        var slot = DeviceSlot(
            name: name, kind: credential.kind, patternRows: UInt8(pattern?.rows ?? 0),
            patternColumns: UInt8(pattern?.columns ?? 0), iterations: UInt32(iterations), saltID: saltID,
            added: now, nonce: nonce, sealed: [])
        let vaultKey = try VaultHeader.vaultKey(credential: credential, deviceSalt: deviceSalt, iterations: iterations)
        slot.sealed = try AESGCM.sealSecret(master, using: vaultKey, nonce: slot.nonce, authenticating: slotAAD(slot))
        if let i = slotIndex(saltID: saltID) {
            slots[i] = slot
        } else {
            guard slots.count < VaultHeader.maximumSlots else {
                throw FormatError.malformed("a vault holds at most \(VaultHeader.maximumSlots) device slots")
            }
            slots.append(slot)
        }
        try reseal(master: master)
    }

    /// Seals `master` in a new recovery envelope for `recoveryPhrase` (fresh salt and nonce), replacing
    /// the old one, and recomputes the MAC: the old phrase no longer opens the vault.
    public mutating func replaceRecoveryEnvelope(
        master: SecureBytes, recoveryPhrase: SecureBytes, iterations: Int
    ) throws {
        try sealRecoveryEnvelope(
            master: master, recoveryPhrase: recoveryPhrase, iterations: iterations, salt: try SecureRandom.bytes(32),
            nonce: try SecureRandom.bytes(12))
        try reseal(master: master)
    }

    private mutating func sealRecoveryEnvelope(
        master: SecureBytes, recoveryPhrase: SecureBytes, iterations: Int, salt: [UInt8], nonce: [UInt8]
    ) throws {
        try KDFPolicy.check(iterations, minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")
        recovery = RecoveryEnvelope(iterations: UInt32(iterations), salt: salt, nonce: nonce, sealed: [])
        let recoveryKey = try VaultHeader.recoveryKey(phrase: recoveryPhrase, salt: salt, iterations: iterations)
        defer { recoveryKey.wipe() }
        recovery.sealed = try AESGCM.sealSecret(
            master, using: recoveryKey, nonce: recovery.nonce, authenticating: recoveryAAD)
    }

    /// Removes slot `index` (never the last one) and recomputes the MAC.
    public mutating func removeSlot(at index: Int, master: SecureBytes) throws {
        precondition(slots.indices.contains(index))
        guard slots.count > 1 else { throw FormatError.malformed("the last device slot cannot be removed") }
        slots.remove(at: index)
        try reseal(master: master)
    }

    /// Makes this a version-2 header authenticated by `master` (the migration of a version-1 header,
    /// and the repair of a damaged one): the slots and the recovery envelope are kept as they are.
    public mutating func reseal(master: SecureBytes) throws {
        version = VaultHeader.formatVersion
        legacyBackup = nil
        mac = try VaultHeader.mac(of: body, master: master)
        checksumMatches = true
    }

    /// Renames the slot of a device, keeping its envelope.
    public mutating func renameSlot(at index: Int, to name: String, master: SecureBytes) throws {
        try VaultHeader.checkDeviceName(name)
        slots[index].name = name
        try reseal(master: master)
    }

    static func checkDeviceName(_ name: String) throws {
        guard !name.isEmpty, name.utf8.count <= maximumDeviceName,
            !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else {
            throw FormatError.malformed("a device name is 1 to \(maximumDeviceName) bytes without control characters")
        }
    }

    // MARK: Opening

    /// The slot for the device whose salt has `saltID`.
    public func slotIndex(saltID: [UInt8]) -> Int? {
        slots.firstIndex { constantTimeEqual($0.saltID, saltID) }
    }

    /// Vault key = PBKDF2-HMAC-SHA512(credential, device salt, iterations).
    public static func vaultKey(credential: Credential, deviceSalt: SecureBytes, iterations: Int) throws -> SecureBytes
    {
        let salt = deviceSalt.withUnsafeBytes { Array($0) }
        return try PBKDF2.deriveSHA512(password: credential.secret, salt: salt, iterations: iterations)
    }

    /// Opens this device's slot: `deviceMismatch` when no slot is this device's, `wrongCredential`
    /// when its envelope does not open. The MAC is checked apart (`isAuthentic(master:)`).
    public func unlock(credential: Credential, deviceSalt: SecureBytes) throws -> SecureBytes {
        guard let i = slotIndex(saltID: try VaultHeader.saltID(of: deviceSalt)) else {
            throw FormatError.deviceMismatch
        }
        return try unlock(slot: i, credential: credential, deviceSalt: deviceSalt)
    }

    /// Opens slot `index` with the credential and `deviceSalt`, whatever salt ID it names: the AAD is
    /// built with the salt ID of `deviceSalt`, which is the one the slot was sealed with if it is this
    /// device's (so a slot whose stored salt ID was damaged still tells a right credential).
    public func unlock(slot index: Int, credential: Credential, deviceSalt: SecureBytes) throws -> SecureBytes {
        var slot = slots[index]
        slot.saltID = try VaultHeader.saltID(of: deviceSalt)
        try KDFPolicy.check(Int(slot.iterations), minimum: KDFPolicy.vaultIterations, what: "vault KDF")
        let key = try VaultHeader.vaultKey(
            credential: credential, deviceSalt: deviceSalt, iterations: Int(slot.iterations))
        do {
            return try AESGCM.openSecret(slot.sealed, using: key, nonce: slot.nonce, authenticating: slotAAD(slot))
        } catch CryptoError.authenticationFailure {
            throw FormatError.wrongCredential
        }
    }

    /// Recovery key = PBKDF2-HMAC-SHA512(normalized phrase, recovery salt, iterations).
    static func recoveryKey(phrase: SecureBytes, salt: [UInt8], iterations: Int) throws -> SecureBytes {
        try PBKDF2.deriveSHA512(password: phrase, salt: salt, iterations: iterations)
    }

    /// Opens the recovery envelope with the normalized phrase.
    public func unlock(recoveryPhrase: SecureBytes) throws -> SecureBytes {
        try KDFPolicy.check(Int(recovery.iterations), minimum: KDFPolicy.recoveryIterations, what: "recovery KDF")
        let key = try VaultHeader.recoveryKey(
            phrase: recoveryPhrase, salt: recovery.salt, iterations: Int(recovery.iterations))
        do {
            return try AESGCM.openSecret(
                recovery.sealed, using: key, nonce: recovery.nonce, authenticating: recoveryAAD)
        } catch CryptoError.authenticationFailure {
            throw FormatError.wrongCredential
        }
    }

    /// Whether every byte of the header is what the holder of `master` wrote: the checksum and the MAC
    /// of a version-2 header match. A version-1 header has neither and is taken as it is.
    public func isAuthentic(master: SecureBytes) -> Bool {
        guard version >= 2 else { return true }
        guard checksumMatches, let expected = try? VaultHeader.mac(of: body, master: master) else { return false }
        return constantTimeEqual(expected, mac)
    }

    /// A non-secret fingerprint of the device salt, so the wrong machine is told apart from a wrong credential.
    public static func saltID(of salt: SecureBytes) throws -> [UInt8] {
        let bytes = salt.withUnsafeBytes { Array($0) }
        return Array(try Digest.sha256(Array(saltIDLabel.utf8) + bytes)[0..<8])
    }

    // MARK: Backup envelopes

    /// Seals `master` under the backup key of `credential` (no device salt): what a backup header
    /// carries. The nonce is derived from the master key and the cost, so every backup made with the
    /// same credential carries the same envelope (and the same backup header, uploaded once). That
    /// never reuses a nonce for two plaintexts: the backup key is fixed by the credential, the vault
    /// ID and the cost, and under it only this vault's master key is ever sealed, with the same AAD.
    public func makeBackupEnvelope(
        master: SecureBytes, credential: Credential, iterations: Int
    ) throws
        -> BackupEnvelope
    {
        try makeBackupEnvelope(
            master: master, backupKey: try backupKey(credential: credential, iterations: iterations),
            iterations: iterations)
    }

    /// The backup envelope sealed under a backup key already derived (`backupKey`) at `iterations`.
    public func makeBackupEnvelope(
        master: SecureBytes, backupKey key: SecureBytes, iterations: Int
    ) throws
        -> BackupEnvelope
    {
        try KDFPolicy.check(iterations, minimum: KDFPolicy.vaultIterations, what: "backup KDF")
        var label = ByteWriter()
        label.raw(Array(VaultHeader.backupNonceLabel.utf8))
        label.u32(UInt32(iterations))
        let nonceKey = try KeyDerivation.subkey(of: master, label: VaultHeader.backupNonceLabel)
        let nonce = Array(try Digest.hmacSHA256(key: nonceKey, message: label.bytes)[0..<12])
        var envelope = BackupEnvelope(iterations: UInt32(iterations), nonce: nonce, sealed: [])
        envelope.sealed = try AESGCM.sealSecret(
            master, using: key, nonce: envelope.nonce, authenticating: backupAAD(envelope))
        return envelope
    }

    /// A version-2 header for a vault restored from a backup: this header's vault ID, chunk size and
    /// recovery envelope, and one slot, this device's.
    public func restored(
        master: SecureBytes, credential: Credential, pattern: Pattern?, deviceSalt: SecureBytes, name: String,
        iterations: Int, now: Int64
    ) throws -> VaultHeader {
        var header = self
        header.slots = []
        try header.setSlot(
            master: master, credential: credential, pattern: pattern, deviceSalt: deviceSalt, name: name,
            iterations: iterations, now: now)
        return header
    }

    /// Opens a backup envelope with the credential alone.
    public func unlock(backup envelope: BackupEnvelope, credential: Credential) throws -> SecureBytes {
        try KDFPolicy.check(Int(envelope.iterations), minimum: KDFPolicy.vaultIterations, what: "backup KDF")
        let key = try backupKey(credential: credential, iterations: Int(envelope.iterations))
        do {
            return try AESGCM.openSecret(
                envelope.sealed, using: key, nonce: envelope.nonce, authenticating: backupAAD(envelope))
        } catch CryptoError.authenticationFailure {
            throw FormatError.wrongCredential
        }
    }

    /// Backup key = PBKDF2-HMAC-SHA512(credential, backup salt, iterations).
    public func backupKey(credential: Credential, iterations: Int) throws -> SecureBytes {
        try PBKDF2.deriveSHA512(
            password: credential.secret, salt: try VaultHeader.backupSalt(vaultID: vaultID), iterations: iterations)
    }

    /// SHA-512(label ‖ vault ID)[0..<32]: a salt every device can compute, so that a backup opens
    /// with the credential alone.
    static func backupSalt(vaultID: [UInt8]) throws -> [UInt8] {
        Array(try Digest.sha512(Array(VaultHeader.backupSaltLabel.utf8) + vaultID)[0..<32])
    }

    // MARK: Encoding

    private func prefix(version: Int) -> [UInt8] {
        var w = ByteWriter()
        w.raw(VaultHeader.magic)
        w.u16(UInt16(version))
        w.raw(vaultID)
        w.u8(chunkSizeLog2)
        w.u8(0)
        return w.bytes
    }

    /// The prefix every envelope's AAD holds: that of a version-1 header.
    public var envelopePrefix: [UInt8] { prefix(version: 1) }

    private static func slotParameters(_ slot: DeviceSlot) -> [UInt8] {
        var w = ByteWriter()
        w.u8(slot.kind.rawValue)
        w.u8(slot.patternRows)
        w.u8(slot.patternColumns)
        w.u32(slot.iterations)
        w.raw(slot.saltID)
        return w.bytes
    }

    func slotAAD(_ slot: DeviceSlot) -> [UInt8] {
        Array(VaultHeader.credentialLabel.utf8) + envelopePrefix + VaultHeader.slotParameters(slot)
    }
    var recoveryAAD: [UInt8] {
        var w = ByteWriter()
        w.u32(recovery.iterations)
        w.raw(recovery.salt)
        return Array(VaultHeader.recoveryLabel.utf8) + envelopePrefix + w.bytes
    }
    func backupAAD(_ envelope: BackupEnvelope) -> [UInt8] {
        var w = ByteWriter()
        w.u32(envelope.iterations)
        return Array(VaultHeader.backupLabel.utf8) + envelopePrefix + w.bytes
    }

    /// The recovery envelope's 96 bytes, as both header versions and the backup header store them.
    public var recoveryBytes: [UInt8] {
        var w = ByteWriter()
        w.u32(recovery.iterations)
        w.raw(recovery.salt)
        w.raw(recovery.nonce)
        w.raw(recovery.sealed)
        return w.bytes
    }

    /// A version-2 header's bytes before the MAC.
    private var body: [UInt8] {
        var w = ByteWriter()
        w.raw(prefix(version: 2))
        w.raw(recoveryBytes)
        w.u8(UInt8(slots.count))
        for slot in slots {
            w.raw(VaultHeader.slotParameters(slot))
            w.i64(slot.added)
            w.string(slot.name)
            w.raw(slot.nonce)
            w.raw(slot.sealed)
        }
        return w.bytes
    }

    static func mac(of body: [UInt8], master: SecureBytes) throws -> [UInt8] {
        let key = try KeyDerivation.subkey(of: master, label: macLabel)
        return try Digest.hmacSHA256(key: key, message: body)
    }

    /// The header as stored. Only version 2 is written: a version-1 header must be `reseal`ed first.
    public func encoded() -> [UInt8] {
        precondition(version == 2 && mac.count == 32, "a header is written only as version 2, sealed")
        let bytes = body + mac
        // SHA-256 of a few hundred bytes in memory cannot fail but for a broken libcrypto.
        guard let checksum = try? Digest.sha256(bytes) else { preconditionFailure("SHA-256 failed") }
        return bytes + checksum
    }

    public init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes, what: "vault header")
        guard try r.raw(4) == VaultHeader.magic else { throw FormatError.malformed("vault header magic") }
        version = Int(try r.u16())
        guard VaultHeader.versionsRead.contains(version) else { throw FormatError.unsupportedVersion(version) }
        if version == 1 {
            guard bytes.count == VaultHeader.version1Size else {
                throw FormatError.malformed("vault header size \(bytes.count)")
            }
        }
        vaultID = try r.raw(16)
        chunkSizeLog2 = try r.u8()
        guard (12...20).contains(chunkSizeLog2) else { throw FormatError.malformed("chunk size 2^\(chunkSizeLog2)") }
        // Reserved: must be zero, so no bit of the header can change unnoticed.
        guard try r.u8() == 0 else { throw FormatError.malformed("vault header reserved byte") }
        if version == 1 {
            var slot = try VaultHeader.readSlotParameters(&r)
            slot.nonce = try r.raw(12)
            slot.sealed = try r.raw(48)
            slots = [slot]
            recovery = try VaultHeader.readRecovery(&r)
            legacyBackup = BackupEnvelope(iterations: try r.u32(), nonce: try r.raw(12), sealed: try r.raw(48))
            mac = []
            checksumMatches = true
            try r.expectEnd()
        } else {
            recovery = try VaultHeader.readRecovery(&r)
            let count = Int(try r.u8())
            guard (1...VaultHeader.maximumSlots).contains(count) else {
                throw FormatError.malformed("device slot count \(count) (1 to \(VaultHeader.maximumSlots))")
            }
            slots = []
            for _ in 0..<count {
                var slot = try VaultHeader.readSlotParameters(&r)
                slot.added = try r.i64()
                slot.name = try r.string()
                guard slot.name.utf8.count <= VaultHeader.maximumDeviceName else {
                    throw FormatError.malformed("device name longer than \(VaultHeader.maximumDeviceName) bytes")
                }
                slot.nonce = try r.raw(12)
                slot.sealed = try r.raw(48)
                slots.append(slot)
            }
            mac = try r.raw(32)
            let stored = try r.raw(32)
            try r.expectEnd()
            checksumMatches = constantTimeEqual(try Digest.sha256(Array(bytes[0..<(bytes.count - 32)])), stored)
            legacyBackup = nil
        }
        try checkFields()
    }

    private static func readSlotParameters(_ r: inout ByteReader) throws -> DeviceSlot {
        guard let kind = Credential.Kind(rawValue: try r.u8()) else { throw FormatError.malformed("credential kind") }
        return DeviceSlot(
            name: "", kind: kind, patternRows: try r.u8(), patternColumns: try r.u8(), iterations: try r.u32(),
            saltID: try r.raw(8), added: 0, nonce: [], sealed: [])
    }

    private static func readRecovery(_ r: inout ByteReader) throws -> RecoveryEnvelope {
        RecoveryEnvelope(iterations: try r.u32(), salt: try r.raw(32), nonce: try r.raw(12), sealed: try r.raw(48))
    }

    /// Every field is in its range before anything uses it: nothing in the header is authenticated
    /// until an envelope opens, and the pattern grid sizes feed arithmetic.
    private func checkFields() throws {
        for slot in slots {
            switch slot.kind {
            case .passphrase:
                guard slot.patternRows == 0, slot.patternColumns == 0 else {
                    throw FormatError.malformed("a passphrase vault's pattern grid must be 0×0")
                }
            case .pattern:
                guard Pattern.gridSizes.contains(Int(slot.patternRows)),
                    Pattern.gridSizes.contains(Int(slot.patternColumns))
                else {
                    throw FormatError.malformed(
                        "pattern grid \(slot.patternColumns)×\(slot.patternRows) (2×2 to 9×9)")
                }
            }
        }
        var counts = slots.map { ("vault", $0.iterations) } + [("recovery", recovery.iterations)]
        if let legacyBackup { counts.append(("backup", legacyBackup.iterations)) }
        for (what, count) in counts {
            guard (KDFPolicy.absoluteMinimum...KDFPolicy.maximum).contains(Int(count)) else {
                throw FormatError.malformed(
                    "\(what) KDF iteration count \(count) (\(KDFPolicy.absoluteMinimum) to \(KDFPolicy.maximum))")
            }
        }
    }

    private init(
        version: Int, vaultID: [UInt8], chunkSizeLog2: UInt8, recovery: RecoveryEnvelope, slots: [DeviceSlot],
        legacyBackup: BackupEnvelope?, mac: [UInt8], checksumMatches: Bool
    ) {
        self.version = version
        self.vaultID = vaultID
        self.chunkSizeLog2 = chunkSizeLog2
        self.recovery = recovery
        self.slots = slots
        self.legacyBackup = legacyBackup
        self.mac = mac
        self.checksumMatches = checksumMatches
    }
}

/// Compares two byte strings in time that depends only on their lengths.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}
