import Glibc
import VaultFS
import VaultFormat
import VaultSystem
import VaultThumbnails

enum ListCommand {
    static let spec = CommandSpec(
        name: "ls", overview: "List a directory inside the vault without mounting it.",
        usage: "vaultaire ls <vault> [<path>]",
        arguments: [
            ("<vault>", "The vault directory."), ("<path>", "Directory or file inside the vault (default /)."),
        ],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback],
        minimumPositionals: 1, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        let vault = try openVault(args, readOnly: true)
        defer { try? vault.close() }
        let path = args.positionals.count > 1 ? args.positionals[1] : "/"
        let node = try PathErrors.inVault(path) { try vault.resolve(path) }
        let entries =
            node.kind == .directory
            ? try vault.list(node.id) : [(name: String(path.split(separator: "/").last ?? ""), inode: node)]
        for (name, n) in entries {
            print(
                "\(modeString(n)) \(String(n.linkCount).leftPadded(3)) \(String(n.size).leftPadded(12)) \(dateString(n.modificationTime)) \(name)"
            )
        }
    }

    static func modeString(_ n: Inode) -> String {
        let type: Character =
            switch n.kind {
            case .directory: "d"
            case .symlink: "l"
            case .fifo: "p"
            case .socket: "s"
            case .characterDevice: "c"
            case .blockDevice: "b"
            case .file: "-"
            }
        var s = String(type)
        let chars = Array("rwxrwxrwx")
        for i in 0..<9 { s.append(n.permissions & (1 << (8 - UInt32(i))) != 0 ? chars[i] : "-") }
        return s
    }

    static func dateString(_ ns: Int64) -> String {
        var t = time_t(ns / 1_000_000_000)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        var buf = [CChar](repeating: 0, count: 32)
        strftime(&buf, 32, "%Y-%m-%d %H:%M", &tmv)
        return String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

enum PutCommand {
    static let spec = CommandSpec(
        name: "put",
        overview: "Copy a local file into the vault; an existing file is replaced only once the copy is complete.",
        usage: "vaultaire put <vault> <source> <destination>",
        arguments: [
            ("<vault>", "The vault directory."), ("<source>", "Local file ('-' for standard input)."),
            ("<destination>", "Path inside the vault; an existing directory receives the file under its own name."),
        ],
        options: [
            CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback, CommonOptions.quiet,
        ],
        minimumPositionals: 3, maximumPositionals: 3)

    static func run(_ args: ParsedArguments) throws {
        let source = args.positionals[1]
        var owned: FileDescriptor?
        if source != "-" {
            let fd = try PathErrors.local(source) { try FileDescriptor(path: source, flags: O_RDONLY) }
            // A directory opens but cannot be read: refuse before the vault is touched.
            if try PathErrors.local(source, { try fd.isDirectory() }) {
                throw CLIError.message("local file \(source) is a directory", .ioError)
            }
            owned = fd
        }
        try withOpenVault(args, readOnly: false) { vault in
            let id = try copyIn(vault, args, from: owned?.rawValue ?? 0, source: source)
            // As a mount does after a close: an image gets its thumbnails (here, before the vault locks).
            if case .skipped(let why) = Thumbnailer.refresh(vault, id) {
                printError("Notice: no thumbnail for \(vault.path(of: id) ?? args.positionals[2]): \(why)")
            }
        }
    }

    /// Writes the copy to a file with no name yet and gives it its name (replacing the old file) in one
    /// step at the end: a failure or a signal on the way leaves the old file as it was.
    private static func copyIn(
        _ vault: UnlockedVault, _ args: ParsedArguments, from input: Int32, source: String
    ) throws -> UInt64 {
        var destination = args.positionals[2]
        if let existing = try? vault.resolve(destination), existing.kind == .directory {
            let base = source == "-" ? "stdin" : String(source.split(separator: "/").last ?? "file")
            destination = (destination.hasSuffix("/") ? destination : destination + "/") + base
        }
        let (parent, name) = try PathErrors.inVault(destination) { try vault.resolveParent(destination) }
        let replaced = try? vault.lookup(parent, name)
        if replaced?.kind == .directory {
            throw CLIError.message("\(destination) in the vault is a directory", .alreadyExists)
        }
        let permissions = replaced?.permissions ?? (0o644 & ~currentUmask())
        let handle = try PathErrors.inVault(destination) {
            try vault.createDetached(named: name, permissions: permissions, caller: .current)
        }
        defer { vault.release(handle) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        let progress = ProgressMeter(total: regularFileSize(input), unit: .bytes, quiet: args.has("quiet"))
        while true {
            let n = try PathErrors.local(source) {
                try buffer.withUnsafeMutableBytes { b in
                    try retryingEINTR("read", path: source) { read(input, b.baseAddress!, b.count) }
                }
            }
            if n == 0 { break }
            _ = try PathErrors.inVault(destination) {
                try buffer.withUnsafeBytes {
                    try vault.write(handle, at: offset, from: UnsafeRawBufferPointer(rebasing: $0[0..<n]))
                }
            }
            offset += n
            progress.update(offset)
        }
        try PathErrors.inVault(destination) { try vault.attach(handle, in: parent, name: name) }
        progress.finish(offset)
        return handle.id
    }
}

enum GetCommand {
    static let spec = CommandSpec(
        name: "get", overview: "Copy a file out of the vault; an existing local file is replaced only with --force.",
        usage: "vaultaire get <vault> <source> <destination> [--force]",
        arguments: [
            ("<vault>", "The vault directory."), ("<source>", "Path inside the vault."),
            ("<destination>", "Local file to create ('-' for standard output)."),
        ],
        options: [
            .init(
                long: "force", short: nil, valueName: nil,
                help: "Replace an existing local file (only once the whole copy has been read and authenticated)."),
            CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback, CommonOptions.quiet,
        ],
        minimumPositionals: 3, maximumPositionals: 3)

    static func run(_ args: ParsedArguments) throws {
        let source = args.positionals[1]
        let destination = args.positionals[2]
        if destination != "-" && !args.has("force") && FileSystem.lexists(destination) {
            throw CLIError.message("local file \(destination) exists; give --force to replace it", .alreadyExists)
        }
        let vault = try openVault(args, readOnly: true)
        defer { try? vault.close() }
        let node = try PathErrors.inVault(source) { try vault.resolve(source) }
        let handle = try PathErrors.inVault(source) { try vault.open(node.id, write: false) }
        defer { vault.release(handle) }
        let progress = ProgressMeter(total: Int(node.size), unit: .bytes, quiet: args.has("quiet"))
        if destination == "-" {
            try copyOut(vault, handle, source: source, to: 1, destination: "standard output", progress: progress)
            return
        }
        // Written beside the destination, renamed over it only once complete: a damaged vault file or
        // an interruption leaves the local file as it was.
        let temporary = try PathErrors.local(destination) { try ReplacementFile(replacing: destination) }
        try copyOut(
            vault, handle, source: source, to: temporary.descriptor.rawValue, destination: destination,
            progress: progress)
        try PathErrors.local(destination) { try temporary.commit() }
    }

    private static func copyOut(
        _ vault: UnlockedVault, _ handle: VaultFS.FileHandle, source: String, to output: Int32,
        destination: String, progress: ProgressMeter
    ) throws {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        defer { progress.finish(offset) }
        while true {
            let n = try PathErrors.inVault(source) {
                try buffer.withUnsafeMutableBytes { try vault.read(handle, at: offset, into: $0) }
            }
            if n == 0 { break }
            try PathErrors.local(destination) {
                try buffer.withUnsafeBytes { b in
                    var done = 0
                    while done < n {
                        done += try retryingEINTR("write", path: destination) {
                            write(output, b.baseAddress! + done, n - done)
                        }
                    }
                }
            }
            offset += n
            progress.update(offset)
        }
    }
}

enum RemoveCommand {
    static let spec = CommandSpec(
        name: "rm", overview: "Remove a file, or an empty directory, inside the vault.",
        usage: "vaultaire rm <vault> <path>",
        arguments: [("<vault>", "The vault directory."), ("<path>", "Path inside the vault.")],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback],
        minimumPositionals: 2, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[1]
        try withOpenVault(args, readOnly: false) { vault in
            try PathErrors.inVault(path) {
                let (parent, name) = try vault.resolveParent(path)
                let node = try vault.lookup(parent, name)
                if node.kind == .directory {
                    try vault.removeDirectory(in: parent, name: name)
                } else {
                    try vault.unlink(in: parent, name: name)
                }
            }
        }
    }
}

enum MakeDirectoryCommand {
    static let spec = CommandSpec(
        name: "mkdir", overview: "Create a directory inside the vault.",
        usage: "vaultaire mkdir <vault> <path>",
        arguments: [("<vault>", "The vault directory."), ("<path>", "Path inside the vault.")],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.acceptRollback],
        minimumPositionals: 2, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        let path = args.positionals[1]
        try withOpenVault(args, readOnly: false) { vault in
            try PathErrors.inVault(path) {
                let (parent, name) = try vault.resolveParent(path)
                try vault.makeNode(
                    in: parent, name: name, kind: .directory, permissions: 0o755 & ~currentUmask(), caller: .current)
            }
        }
    }
}

/// The size of the file open on `fd` if it is a regular file (a pipe's is unknown).
func regularFileSize(_ fd: Int32) -> Int? {
    var st = stat()
    guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
    return Int(st.st_size)
}

func currentUmask() -> UInt32 {
    let m = umask(0o022)
    umask(m)
    return UInt32(m)
}
