import VaultKeychain

/// The Secret Service backend. Reachability is checked by the first real call, which fails with one
/// line naming both ways out (unlock a keyring, or choose the file keychain).
func secretServiceBackend() throws -> KeychainBackend {
    SecretServiceKeychain()
}
