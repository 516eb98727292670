import Glibc
import VaultFS
import VaultFormat
import VaultSystem
import VaultThumbnails

enum ThumbnailCommand {
    static let spec = CommandSpec(
        name: "thumbnail",
        overview: "Write a file's decrypted thumbnail (PNG) to a local file, for scripts and checks.",
        usage: "vaultaire thumbnail <vault> <path> <output> [--size normal|large] [--force]",
        arguments: [
            ("<vault>", "The vault directory."), ("<path>", "Path of an image inside the vault."),
            ("<output>", "Local PNG file to create ('-' for standard output)."),
        ],
        options: [
            .init(
                long: "size", short: nil, valueName: "size",
                help: "normal (longest side 128 px) or large (256 px, the default)."),
            .init(long: "force", short: nil, valueName: nil, help: "Replace an existing local file."),
            CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback,
        ],
        minimumPositionals: 3, maximumPositionals: 3)

    static func run(_ args: ParsedArguments) throws {
        let source = args.positionals[1]
        let destination = args.positionals[2]
        let size = args.value("size") ?? "large"
        guard size == "normal" || size == "large" else {
            throw CLIError.usage("--size is normal or large, got '\(size)'", command: spec.name)
        }
        if destination != "-" && !args.has("force") && FileSystem.lexists(destination) {
            throw CLIError.message("local file \(destination) exists; give --force to replace it", .alreadyExists)
        }
        let vault = try openVault(args, readOnly: true)
        defer { try? vault.close() }
        let node = try PathErrors.inVault(source) { try vault.resolve(source) }
        guard node.kind == .file else { throw CLIError.message("\(source) in the vault is not a file", .notFound) }
        let set: ThumbnailSet
        do {
            guard let found = try vault.thumbnails(node.id) else {
                throw CLIError.message(
                    "\(source) in the vault has no thumbnail ('vaultaire thumbnails --rebuild' makes missing ones)",
                    .notFound)
            }
            set = found
        } catch let FormatError.damaged(why) {
            throw CLIError.message("thumbnail of \(source) in the vault is damaged: \(why)", .damaged)
        }
        if set.contentVersion != nil && !set.isCurrent(contentVersion: node.contentVersion, size: node.size) {
            throw CLIError.message(
                "the thumbnail of \(source) in the vault is stale (made from earlier contents); "
                    + "'vaultaire thumbnails --rebuild' makes it again", .notFound)
        }
        let png = size == "large" ? set.large : set.normal
        if destination == "-" {
            try write(png, to: 1, name: "standard output")
            return
        }
        let temporary = try PathErrors.local(destination) { try ReplacementFile(replacing: destination) }
        try write(png, to: temporary.descriptor.rawValue, name: destination)
        try PathErrors.local(destination) { try temporary.commit() }
    }

    private static func write(_ bytes: [UInt8], to fd: Int32, name: String) throws {
        try PathErrors.local(name) {
            try bytes.withUnsafeBytes { b in
                var done = 0
                while done < b.count {
                    done += try retryingEINTR("write", path: name) {
                        Glibc.write(fd, b.baseAddress! + done, b.count - done)
                    }
                }
            }
        }
    }
}

enum ThumbnailsCommand {
    static let spec = CommandSpec(
        name: "thumbnails",
        overview:
            "Make the thumbnails of every image in the vault again (for vaults filled before thumbnails existed).",
        usage: "vaultaire thumbnails <vault> --rebuild",
        arguments: [("<vault>", "The vault directory (not mounted).")],
        options: [
            .init(
                long: "rebuild", short: nil, valueName: nil,
                help: "Read every file, make thumbnails of the images, remove those of files that are no images."),
            CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback, CommonOptions.quiet,
        ],
        minimumPositionals: 1, maximumPositionals: 1)

    static func run(_ args: ParsedArguments) throws {
        guard args.has("rebuild") else {
            throw CLIError.usage("say what to do: --rebuild", command: spec.name)
        }
        try withOpenVault(args, readOnly: false) { vault in
            let ids = vault.namedFileIDs()
            let progress = ProgressMeter(total: ids.count, unit: .files, quiet: args.has("quiet"))
            var made = 0
            var skipped: [String] = []
            for (n, id) in ids.enumerated() {
                switch Thumbnailer.refresh(vault, id) {
                case .made: made += 1
                case .skipped(let why): skipped.append("\(vault.path(of: id) ?? "inode \(id)"): \(why)")
                case .removed, .nothingToDo: break
                }
                progress.update(n + 1)
            }
            progress.finish(ids.count)
            for line in skipped { printError("Notice: no thumbnail for \(line)") }
            print("Made thumbnails of \(made) of \(ids.count) files; \(skipped.count) image(s) skipped.")
        }
    }
}
