import Glibc
import VaultCrypto
import VaultSystem

/// Reads secrets from the terminal (echo off), from files (SecretFile) or from a command
/// (ExternalPassword), straight into secure storage.
enum SecretInput {
    static let maximumLength = 4096

    /// Asks on /dev/tty with echo off; fails with a usage error when there is no terminal.
    static func prompt(_ text: String, fileOption: String) throws -> SecureBytes {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else {
            throw CLIError.usage("no terminal to ask on; give the secret with --\(fileOption) FILE", command: nil)
        }
        defer { close(tty) }
        var saved = termios()
        let haveTermios = tcgetattr(tty, &saved) == 0
        if haveTermios {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            tcsetattr(tty, TCSAFLUSH, &quiet)
        }
        defer {
            if haveTermios {
                var s = saved
                tcsetattr(tty, TCSAFLUSH, &s)
            }
        }
        _ = text.withCString { write(tty, $0, strlen($0)) }
        let buffer = SecureBytes(count: maximumLength)
        var length = 0
        try buffer.withUnsafeMutableBytes { b in
            while length < maximumLength {
                var c: UInt8 = 0
                let n = Glibc.read(tty, &c, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 || c == 10 { break }
                b[length] = c
                length += 1
            }
            if length == maximumLength {
                throw CLIError.usage("secret longer than \(maximumLength) bytes", command: nil)
            }
        }
        return buffer.slice(0..<length)
    }

    /// A secret from `--<fileOption>` if given, else from the terminal (twice when `confirm`).
    /// `--extpass` stands in for `--passphrase-file` (the current or, for init, the first credential).
    static func obtain(
        _ args: ParsedArguments, fileOption: String, prompt text: String, confirm: Bool
    ) throws -> SecureBytes {
        let command = fileOption == "passphrase-file" ? args.value("extpass") : nil
        if let path = args.value(fileOption) {
            guard command == nil else {
                throw CLIError.usage("give --\(fileOption) or --extpass, not both", command: args.command)
            }
            if path == "-", args.command == "put", args.positionals.dropFirst().first == "-" {
                throw CLIError.usage(
                    "standard input cannot carry both the credential and the file to put", command: args.command)
            }
            let fromStandardInput = args.values.filter { $0.key.hasSuffix("-file") && $0.value == "-" }.keys.sorted()
            if path == "-", fromStandardInput.count > 1 {
                throw CLIError.usage(
                    "standard input can carry only one secret: \(fromStandardInput.map { "--" + $0 }.joined(separator: " and ")) both read it",
                    command: args.command)
            }
            return try SecretFile.read(path, option: fileOption)
        }
        if let command { return try ExternalPassword.run(command) }
        let first = try prompt(text, fileOption: fileOption)
        if confirm {
            let second = try prompt("Repeat to confirm: ", fileOption: fileOption)
            guard first.constantTimeEquals(second) else {
                throw CLIError.message("the two entries do not match", .usage)
            }
        }
        return first
    }
}

/// Whether standard error is a terminal (for progress bars).
var standardErrorIsTerminal: Bool { isatty(2) == 1 }

func printError(_ line: String) {
    let text = line.hasSuffix("\n") ? line : line + "\n"
    StandardError.write(text)
}
