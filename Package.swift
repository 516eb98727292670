// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Vaultaire",
    products: [
        .executable(name: "vaultaire", targets: ["vaultaire"]),
        .executable(name: "vaultaire-populate", targets: ["VaultPopulate"]),
        // For the fuzz targets in Fuzz/, which depend on this package by path.
        .library(name: "VaultFormat", targets: ["VaultFormat"]),
        .library(name: "VaultCrypto", targets: ["VaultCrypto"]),
        .library(name: "VaultSystem", targets: ["VaultSystem"]),
    ],
    targets: [
        // C libraries from Debian, each behind one thin Swift module.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

        .systemLibrary(name: "CFuse", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        // Reads and writes the FUSE device for libfuse, to negotiate what libfuse 3.14 cannot (KILLPRIV_V2).
        .target(name: "CFuseWire"),
        // FUSE over io_uring (liburing, Debian's liburing-dev), plugged into CFuseWire's device hooks
        // where the kernel allows it. Deleted once libfuse serves io_uring itself (ARCHITECTURE.md).
        .target(name: "CFuseRing", dependencies: ["CFuseWire"], linkerSettings: [.linkedLibrary("uring")]),

        // libsecret (Debian's libsecret-1-dev). Its pkg-config adds -pthread, which SwiftPM warns about,
        // so the include paths are given here directly.
        .target(
            name: "CSecretService",
            cSettings: [
                .unsafeFlags([
                    "-I/usr/include/libsecret-1", "-I/usr/include/glib-2.0",
                    "-I/usr/lib/x86_64-linux-gnu/glib-2.0/include", "-I/usr/lib/aarch64-linux-gnu/glib-2.0/include",
                ])
            ],
            linkerSettings: [
                .linkedLibrary("secret-1"), .linkedLibrary("gio-2.0"), .linkedLibrary("gobject-2.0"),
                .linkedLibrary("glib-2.0"),
            ]),

        // libvips (Debian's libvips-dev): thumbnails, from memory to memory, behind non-variadic calls.
        .target(
            name: "CVips",
            cSettings: [
                .unsafeFlags([
                    "-I/usr/include/glib-2.0", "-I/usr/lib/x86_64-linux-gnu/glib-2.0/include",
                    "-I/usr/lib/aarch64-linux-gnu/glib-2.0/include",
                ])
            ],
            linkerSettings: [
                // libvips itself is loaded at the first thumbnail (dlopen, vips_shim.c).
                .linkedLibrary("gobject-2.0"), .linkedLibrary("glib-2.0"),
            ]),

        .target(name: "VaultCrypto", dependencies: ["COpenSSL"]),
        .target(name: "CSystemShims"),
        .target(name: "VaultSystem", dependencies: ["CSystemShims"]),
        .target(name: "VaultFormat", dependencies: ["VaultCrypto", "VaultSystem"]),
        .target(name: "VaultKeychain", dependencies: ["VaultCrypto", "VaultSystem", "CSecretService"]),
        .target(name: "VaultFS", dependencies: ["VaultCrypto", "VaultSystem", "VaultFormat", "VaultKeychain"]),
        // Thumbnails of the vault's images: made with libvips in the background, sealed in the vault.
        .target(
            name: "VaultThumbnails",
            dependencies: ["CVips", "CSystemShims", "VaultCrypto", "VaultSystem", "VaultFormat", "VaultFS"]),
        // Ciphertext backups through rclone: the backup format (headers, manifests) and its logic.
        .target(
            name: "VaultBackup",
            dependencies: ["VaultCrypto", "VaultSystem", "VaultFormat", "VaultKeychain", "VaultFS"]),
        .target(
            name: "VaultFUSE",
            dependencies: [
                "CFuse", "CFuseWire", "CFuseRing", "VaultCrypto", "VaultFS", "VaultFormat", "VaultSystem",
                "VaultThumbnails",
            ]),
        .executableTarget(
            name: "vaultaire",
            dependencies: [
                "VaultCrypto", "VaultSystem", "VaultFormat", "VaultKeychain", "VaultFS", "VaultFUSE", "VaultBackup",
                "VaultThumbnails",
            ]),

        // Fills a vault with many small files through the engine, for the benchmarks' scale part.
        .executableTarget(
            name: "VaultPopulate", dependencies: ["VaultSystem", "VaultFormat", "VaultKeychain", "VaultFS"]),

        .testTarget(name: "VaultCryptoTests", dependencies: ["VaultCrypto"], resources: [.copy("Vectors")]),
        .testTarget(name: "VaultSystemTests", dependencies: ["VaultSystem"]),
        .testTarget(name: "VaultFormatTests", dependencies: ["VaultCrypto", "VaultFormat", "VaultSystem"]),
        .testTarget(
            name: "VaultThumbnailsTests",
            dependencies: ["VaultCrypto", "VaultFormat", "VaultFS", "VaultKeychain", "VaultSystem", "VaultThumbnails"]),
        .testTarget(
            name: "VaultFSTests",
            dependencies: ["VaultCrypto", "VaultFormat", "VaultFS", "VaultKeychain", "VaultSystem"],
            resources: [.copy("Fixtures")]),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "CLITests", dependencies: ["TestSupport"]),
        .testTarget(name: "MountTests", dependencies: ["TestSupport"]),
        // The C transport's bounds checks, in C (a test executable), run by RingBoundsTests.
        .executableTarget(
            name: "ring-bounds-tests", dependencies: ["CFuseRing", "CFuseWire"], path: "Tests/RingBoundsTests"),
        .testTarget(name: "TransportTests", dependencies: ["TestSupport"]),
        .testTarget(
            name: "BackupTests",
            dependencies: ["VaultBackup", "VaultCrypto", "VaultFormat", "VaultFS", "VaultKeychain", "TestSupport"]),
        .testTarget(
            name: "KeychainTests", dependencies: ["VaultCrypto", "VaultKeychain", "VaultSystem", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
