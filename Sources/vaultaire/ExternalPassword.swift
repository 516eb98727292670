import Glibc
import VaultCrypto
import VaultSystem

/// `--extpass COMMAND`: runs COMMAND through `/bin/sh -c`, as gocryptfs does, and takes the
/// credential from its standard output (one trailing newline stripped). Its standard input and error
/// are this process's, so it can ask on the terminal or show a dialog. The credential travels through
/// a pipe only: never through an argument, the environment or a file.
enum ExternalPassword {
    static func run(_ command: String) throws -> SecureBytes {
        let source = "the --extpass command"
        var ends: [Int32] = [-1, -1]
        // Close-on-exec on both ends (set before any other process is started here), so the command
        // holds only the write end it gets as its standard output.
        guard pipe(&ends) == 0, fcntl(ends[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(ends[1], F_SETFD, FD_CLOEXEC) == 0
        else {
            throw CLIError.message("cannot run \(source): \(String(cString: strerror(errno)))", .credentialUnavailable)
        }
        let (readEnd, writeEnd) = (ends[0], ends[1])
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)  // dup2 clears close-on-exec on 1
        let words: [String] = ["/bin/sh", "-c", command]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, environ)
        close(writeEnd)
        guard spawned == 0 else {
            close(readEnd)
            throw CLIError.message(
                "cannot run \(source): \(String(cString: strerror(spawned)))", .credentialUnavailable)
        }
        let result = Result { () throws(SecretStream.Failure) in try SecretStream.readToEnd(readEnd) }
        close(readEnd)  // a command still writing past the limit gets SIGPIPE instead of blocking
        if case .failure(.tooLong) = result { kill(pid, SIGTERM) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let signal = status & 0x7f
        var killedHere = false
        if case .failure(.tooLong) = result { killedHere = true }
        if signal != 0, !killedHere {
            throw CLIError.message("\(source) was ended by signal \(signal)", .credentialUnavailable)
        }
        if signal == 0, (status >> 8) & 0xff != 0 {
            throw CLIError.message("\(source) failed (exit status \((status >> 8) & 0xff))", .credentialUnavailable)
        }
        switch result {
        case .success(let secret): return secret
        case .failure(let e): throw CLIError.message(e.message(source), .credentialUnavailable)
        }
    }
}
