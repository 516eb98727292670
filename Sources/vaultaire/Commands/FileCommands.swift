import Glibc
import VaultFS
import VaultFormat
import VaultSystem

enum ListCommand {
    static let spec = CommandSpec(
        name: "ls", overview: "List a directory inside the vault without mounting it.",
        usage: "vaultaire ls <vault> [<path>]",
        arguments: [("<vault>", "The vault directory."), ("<path>", "Directory or file inside the vault (default /).")],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain],
        minimumPositionals: 1, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        let vault = try openVault(args, readOnly: true)
        defer { try? vault.close() }
        let path = args.positionals.count > 1 ? args.positionals[1] : "/"
        let node = try vault.resolve(path)
        let entries = node.kind == .directory ? try vault.list(node.id) : [(name: String(path.split(separator: "/").last ?? ""), inode: node)]
        for (name, n) in entries {
            print("\(modeString(n)) \(String(n.linkCount).leftPadded(3)) \(String(n.size).leftPadded(12)) \(dateString(n.modificationTime)) \(name)")
        }
    }

    static func modeString(_ n: Inode) -> String {
        let type: Character = switch n.kind {
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
        name: "put", overview: "Copy a local file into the vault.",
        usage: "vaultaire put <vault> <source> <destination>",
        arguments: [("<vault>", "The vault directory."), ("<source>", "Local file ('-' for standard input)."),
                    ("<destination>", "Path inside the vault; an existing directory receives the file under its own name.")],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.quiet],
        minimumPositionals: 3, maximumPositionals: 3)

    static func run(_ args: ParsedArguments) throws {
        let source = args.positionals[1]
        let input: Int32
        var owned: FileDescriptor?
        if source == "-" { input = 0 } else {
            owned = try FileDescriptor(path: source, flags: O_RDONLY)
            input = owned!.rawValue
        }
        _ = owned
        try withOpenVault(args, readOnly: false) { vault in try copyIn(vault, args, from: input, source: source) }
    }

    private static func copyIn(_ vault: UnlockedVault, _ args: ParsedArguments, from input: Int32, source: String) throws {
        var destination = args.positionals[2]
        if let existing = try? vault.resolve(destination), existing.kind == .directory {
            let base = source == "-" ? "stdin" : String(source.split(separator: "/").last ?? "file")
            destination = (destination.hasSuffix("/") ? destination : destination + "/") + base
        }
        let (parent, name) = try vault.resolveParent(destination)
        let handle = try vault.create(in: parent, name: name, permissions: 0o644 & ~currentUmask(), caller: .current, exclusive: false)
        defer { vault.release(handle) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        let progress = ProgressMeter(total: regularFileSize(input), unit: .bytes, quiet: args.has("quiet"))
        while true {
            let n = try buffer.withUnsafeMutableBytes { b in
                try retryingEINTR("read", path: source) { read(input, b.baseAddress!, b.count) }
            }
            if n == 0 { break }
            _ = try buffer.withUnsafeBytes { try vault.write(handle, at: offset, from: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += n
            progress.update(offset)
        }
        try vault.fsync(handle)
        progress.finish(offset)
    }
}

enum GetCommand {
    static let spec = CommandSpec(
        name: "get", overview: "Copy a file out of the vault.",
        usage: "vaultaire get <vault> <source> <destination>",
        arguments: [("<vault>", "The vault directory."), ("<source>", "Path inside the vault."),
                    ("<destination>", "Local file to create ('-' for standard output).")],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain, CommonOptions.quiet],
        minimumPositionals: 3, maximumPositionals: 3)

    static func run(_ args: ParsedArguments) throws {
        let vault = try openVault(args, readOnly: true)
        defer { try? vault.close() }
        let node = try vault.resolve(args.positionals[1])
        let handle = try vault.open(node.id, write: false)
        defer { vault.release(handle) }
        let destination = args.positionals[2]
        let output: Int32
        var owned: FileDescriptor?
        if destination == "-" { output = 1 } else {
            owned = try FileDescriptor(path: destination, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            output = owned!.rawValue
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        let progress = ProgressMeter(total: Int(node.size), unit: .bytes, quiet: args.has("quiet"))
        defer { progress.finish(offset) }
        while true {
            let n = try buffer.withUnsafeMutableBytes { try vault.read(handle, at: offset, into: $0) }
            if n == 0 { break }
            try buffer.withUnsafeBytes { b in
                var done = 0
                while done < n {
                    done += try retryingEINTR("write", path: destination) { write(output, b.baseAddress! + done, n - done) }
                }
            }
            offset += n
            progress.update(offset)
        }
        if let owned { try owned.sync() }
    }
}

enum RemoveCommand {
    static let spec = CommandSpec(
        name: "rm", overview: "Remove a file, or an empty directory, inside the vault.",
        usage: "vaultaire rm <vault> <path>",
        arguments: [("<vault>", "The vault directory."), ("<path>", "Path inside the vault.")],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain],
        minimumPositionals: 2, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        try withOpenVault(args, readOnly: false) { vault in
            let (parent, name) = try vault.resolveParent(args.positionals[1])
            let node = try vault.lookup(parent, name)
            if node.kind == .directory { try vault.removeDirectory(in: parent, name: name) } else { try vault.unlink(in: parent, name: name) }
        }
    }
}

enum MakeDirectoryCommand {
    static let spec = CommandSpec(
        name: "mkdir", overview: "Create a directory inside the vault.",
        usage: "vaultaire mkdir <vault> <path>",
        arguments: [("<vault>", "The vault directory."), ("<path>", "Path inside the vault.")],
        options: [CommonOptions.passphraseFile, CommonOptions.keychain],
        minimumPositionals: 2, maximumPositionals: 2)

    static func run(_ args: ParsedArguments) throws {
        try withOpenVault(args, readOnly: false) { vault in
            let (parent, name) = try vault.resolveParent(args.positionals[1])
            try vault.makeNode(in: parent, name: name, kind: .directory, permissions: 0o755 & ~currentUmask(), caller: .current)
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

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
