import Glibc

/// Tells the service manager how the service is doing: systemd's readiness protocol (sd_notify(3)),
/// written here without libsystemd. A `Type=notify` unit is started once the process sends
/// `READY=1` to the datagram socket named in `NOTIFY_SOCKET` (a path, or an abstract name that
/// starts with '@'). Without that variable nothing is sent.
public enum ServiceManager {
    /// The socket address, taken from the environment once; the variable is then removed, so that
    /// helpers this process starts (fusermount3) do not speak for it.
    private static let socketPath: String? = {
        let path = FileSystem.environment("NOTIFY_SOCKET")
        unsetenv("NOTIFY_SOCKET")
        return path
    }()

    /// The service is up: for the mount, the folder is mounted.
    public static func ready(status: String) { notify("READY=1\nSTATUS=\(status)\nMAINPID=\(getpid())") }

    /// The service is stopping: the vault is being saved and locked.
    public static func stopping(status: String) { notify("STOPPING=1\nSTATUS=\(status)") }

    /// Sends `state` (newline-separated VARIABLE=value assignments) in one datagram; returns whether
    /// it was sent. Failures are not errors: the service works the same without a manager.
    @discardableResult
    public static func notify(_ state: String) -> Bool {
        guard let path = socketPath, path.hasPrefix("/") || path.hasPrefix("@"), path.utf8.count < 108 else {
            return false
        }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var name = Array(path.utf8)
        if name[0] == UInt8(ascii: "@") { name[0] = 0 }  // an abstract name: a leading NUL, no terminator
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            for (i, byte) in name.enumerated() { sunPath[i] = byte }
        }
        // For a path the terminating NUL is counted (the struct is zeroed); for an abstract name not.
        let length = MemoryLayout<sa_family_t>.size + name.count + (name[0] == 0 ? 0 : 1)
        let sent = state.withCString { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, text, strlen(text), Int32(MSG_NOSIGNAL), $0, socklen_t(length))
                }
            }
        }
        return sent >= 0
    }
}
