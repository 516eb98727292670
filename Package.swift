// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Vaultaire",
    products: [
        .executable(name: "vaultaire", targets: ["vaultaire"])
    ],
    targets: [
        // C libraries from Debian, each behind one thin Swift module.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

        .target(name: "VaultCrypto", dependencies: ["COpenSSL"]),
        .target(name: "CSystemShims"),
        .target(name: "VaultSystem", dependencies: ["CSystemShims"]),
        .target(name: "VaultFormat", dependencies: ["VaultCrypto", "VaultSystem"]),
        .target(name: "VaultKeychain", dependencies: ["VaultCrypto", "VaultSystem"]),
        .target(name: "VaultFS", dependencies: ["VaultCrypto", "VaultSystem", "VaultFormat", "VaultKeychain"]),
        .executableTarget(
            name: "vaultaire",
            dependencies: ["VaultCrypto", "VaultSystem", "VaultFormat", "VaultKeychain", "VaultFS"]),

        .testTarget(name: "VaultCryptoTests", dependencies: ["VaultCrypto"], resources: [.copy("Vectors")]),
        .testTarget(name: "VaultFormatTests", dependencies: ["VaultCrypto", "VaultFormat", "VaultSystem"]),
        .testTarget(name: "VaultFSTests", dependencies: ["VaultCrypto", "VaultFormat", "VaultFS", "VaultKeychain", "VaultSystem"]),
        .testTarget(name: "CLITests", dependencies: ["VaultSystem"]),
    ],
    swiftLanguageModes: [.v5]
)
