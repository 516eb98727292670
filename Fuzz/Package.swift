// swift-tools-version:6.0
// libFuzzer targets for every parser of on-disk data. Built and run by scripts/fuzz.sh (coverage
// instrumentation, AddressSanitizer, libFuzzer's driver); not part of the main build.
import PackageDescription

let targets = ["FuzzVaultHeader", "FuzzIndex", "FuzzJournal", "FuzzFileBlob", "FuzzRecoveryPhrase", "FuzzThumbnail"]

let package = Package(
    name: "VaultaireFuzz",
    dependencies: [.package(name: "Vaultaire", path: "..")],
    targets: [.target(name: "FuzzDriver")]
        + targets.map { name in
            .executableTarget(
                name: name,
                dependencies: [
                    "FuzzDriver", .product(name: "VaultFormat", package: "Vaultaire"),
                    .product(name: "VaultCrypto", package: "Vaultaire"),
                    .product(name: "VaultSystem", package: "Vaultaire"),
                ],
                swiftSettings: [.unsafeFlags(["-parse-as-library"])])
        },
    swiftLanguageModes: [.v5]
)
