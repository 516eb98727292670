import Glibc
import VaultCrypto
import VaultSystem

/// Reads secrets from the terminal (echo off) or from files, straight into secure storage.
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
        defer { if haveTermios { var s = saved; tcsetattr(tty, TCSAFLUSH, &s) } }
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
            if length == maximumLength { throw CLIError.usage("secret longer than \(maximumLength) bytes", command: nil) }
        }
        return buffer.slice(0..<length)
    }

    /// The whole file, with one trailing newline removed.
    static func read(file path: String) throws -> SecureBytes {
        let fd: FileDescriptor
        do { fd = try FileDescriptor(path: path, flags: O_RDONLY) } catch {
            let code = (error as? SystemError)?.errno ?? EIO
            throw CLIError.message("cannot read the local secret file \(path): \(PathErrors.reason(code))", localExitCode(code))
        }
        let size = try fd.size()
        guard size <= maximumLength else { throw CLIError.usage("secret file \(path) is larger than \(maximumLength) bytes", command: nil) }
        let raw = SecureBytes(count: size)
        let n = try raw.withUnsafeMutableBytes { try fd.read(into: $0, at: 0) }
        var end = n
        raw.withUnsafeBytes { if end > 0 && $0[end - 1] == 10 { end -= 1 } }
        return raw.slice(0..<end)
    }

    /// A secret from `--<fileOption>` if given, else from the terminal (twice when `confirm`).
    static func obtain(_ args: ParsedArguments, fileOption: String, prompt text: String, confirm: Bool) throws -> SecureBytes {
        if let path = args.value(fileOption) { return try read(file: path) }
        let first = try prompt(text, fileOption: fileOption)
        if confirm {
            let second = try prompt("Repeat to confirm: ", fileOption: fileOption)
            guard first.constantTimeEquals(second) else { throw CLIError.message("the two entries do not match", .usage) }
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
