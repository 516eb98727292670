import Glibc

/// Runs a helper program (fusermount3) and waits for it; returns its exit status.
public enum Subprocess {
    public static func run(_ argv: [String]) -> Int32 {
        var pid = pid_t()
        let cArgs = argv.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        let spawned = cArgs.withUnsafeBufferPointer { args in
            posix_spawnp(&pid, argv[0], nil, nil, UnsafeMutablePointer(mutating: args.baseAddress!), environ)
        }
        guard spawned == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    }
}
