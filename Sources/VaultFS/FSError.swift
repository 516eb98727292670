import Glibc
import VaultFormat
import VaultSystem

/// A filesystem failure as an errno (what the mount returns as `-errno`), with a reason for logs.
public struct FSError: Error, CustomStringConvertible, Equatable {
    public let errno: Int32
    public let reason: String

    public init(_ errno: Int32, _ reason: String = "") {
        self.errno = errno
        self.reason = reason
    }

    public var description: String {
        let text = String(cString: strerror(errno))
        return reason.isEmpty ? text : "\(reason): \(text)"
    }

    public static func == (a: FSError, b: FSError) -> Bool { a.errno == b.errno }

    /// The errno for any error thrown below the mount: damaged data is EIO, system failures keep theirs.
    public static func errno(for error: Error) -> Int32 {
        switch error {
        case let e as FSError: return e.errno
        case let e as SystemError: return e.errno
        case is DamagedFile: return EIO
        case is FormatError: return EIO
        default: return EIO
        }
    }
}

/// A file's data failed authentication or is missing from its blob: the engine's "damaged", which the
/// mount answers with EIO and the command reports by the file's path.
public struct DamagedFile: Error, CustomStringConvertible {
    public let inode: UInt64
    /// What failed, without the file's identity (the caller names it).
    public let reason: String
    public var description: String { "file \(inode): \(reason)" }
}

/// Wall-clock time in nanoseconds since the epoch.
public func nowNanoseconds() -> Int64 { nanosecondsSinceEpoch(CLOCK_REALTIME) }

/// Wall-clock time as the kernel stamps files: its clock tick (a few milliseconds) at most behind.
/// A new file gets these times, so that a write in the same tick finds them current and the
/// kernel's write-back cache has no times of its own to push back (one SETATTR less per file).
public func coarseNowNanoseconds() -> Int64 { nanosecondsSinceEpoch(CLOCK_REALTIME_COARSE) }

private func nanosecondsSinceEpoch(_ clock: clockid_t) -> Int64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}
