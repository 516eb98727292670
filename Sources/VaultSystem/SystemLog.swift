import Glibc

/// The mount daemon's log: standard error while it is attached to a terminal (or runs with `-f`),
/// syslog(3) — which journald collects — once it is in the background, where standard error is
/// /dev/null. Messages name vaults and files by path and never hold a secret.
public enum SystemLog {
    public enum Level {
        /// Mount, unmount, idle lock.
        case notice
        /// Something was repaired or dropped: crash-recovery notices.
        case warning
        /// An I/O error, data that failed authentication, a wrong credential, a failed save.
        case error

        var priority: Int32 {
            switch self {
            case .notice: return LOG_NOTICE
            case .warning: return LOG_WARNING
            case .error: return LOG_ERR
            }
        }
    }

    private static let state = Guarded(false)
    /// openlog(3) keeps the pointer: this one lives as long as the process and is never written.
    nonisolated(unsafe) private static let identifier = strdup("vaultaire")

    /// From now on messages go to syslog, facility LOG_USER, tagged "vaultaire[PID]". The
    /// corresponding C function is `openlog`.
    public static func useSyslog() {
        state.withLock { toSyslog in
            openlog(identifier, LOG_PID | LOG_NDELAY, LOG_USER)
            toSyslog = true
        }
    }

    /// Whether messages go to syslog (else to standard error).
    public static var isUsingSyslog: Bool { state.withLock { $0 } }

    /// Logs one message. The corresponding C function is `syslog` (through `vsyslog`, as Swift
    /// cannot call a variadic C function).
    public static func log(_ level: Level, _ message: String) {
        let line = message.replacingNewlines
        if isUsingSyslog {
            line.withCString { text in withVaList([text]) { vsyslog(level.priority, "%s", $0) } }
        } else {
            StandardError.write("vaultaire: \(line)\n")
        }
    }

    /// Logs to syslog only, whatever the destination of the rest: for the command's own failures
    /// (a wrong credential at mount), which it also prints on standard error.
    public static func record(_ level: Level, _ message: String) {
        if !isUsingSyslog { openlog(identifier, LOG_PID, LOG_USER) }
        message.replacingNewlines.withCString { text in withVaList([text]) { vsyslog(level.priority, "%s", $0) } }
    }
}
