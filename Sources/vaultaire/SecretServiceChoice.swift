import VaultKeychain

/// The Secret Service backend, when a session bus offers one.
func secretServiceBackend() throws -> KeychainBackend {
    throw KeychainError.unavailable(
        "no Secret Service (org.freedesktop.secrets) is reachable on the session bus; start or unlock your login keyring, or choose the file keychain with --keychain file or VAULTAIRE_KEYCHAIN=file")
}
