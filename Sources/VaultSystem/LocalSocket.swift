internal import CSystemShims
import Glibc

/// Stream sockets in Linux's abstract unix namespace: named without a file (nothing to clean up, no
/// path an attacker can plant), gone with the process that listens.
public enum LocalSocket {
    /// Listens on `name`. The corresponding C functions are `socket`, `bind` and `listen`.
    public static func listen(name: String) throws -> FileDescriptorHandle {
        let fd = vaultaire_abstract_listen(name)
        guard fd >= 0 else { throw SystemError(errno: errno, operation: "listen", path: "@" + name) }
        return FileDescriptorHandle(fd)
    }

    /// Connects to `name`; nil when nothing listens there.
    public static func connect(name: String) -> FileDescriptorHandle? {
        let fd = vaultaire_abstract_connect(name)
        return fd >= 0 ? FileDescriptorHandle(fd) : nil
    }

    /// Takes a waiting connection from a listening socket; nil when there is none or it failed.
    public static func accept(from listener: FileDescriptorHandle) -> FileDescriptorHandle? {
        let fd = Glibc.accept(listener.rawValue, nil, nil)
        guard fd >= 0 else { return nil }
        // Not atomic with accept: a program started in that instant would hold the socket until it exits.
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return FileDescriptorHandle(fd)
    }

    /// The user ID of the peer of a connected socket.
    public static func peerUID(_ fd: Int32) -> uid_t? {
        let uid = vaultaire_peer_uid(fd)
        return uid >= 0 ? uid_t(uid) : nil
    }
}

/// A descriptor that is not a file (a socket), closed on release.
public final class FileDescriptorHandle: @unchecked Sendable {
    public let rawValue: Int32
    public init(_ rawValue: Int32) { self.rawValue = rawValue }
    deinit { _ = Glibc.close(rawValue) }

    /// Writes all of `bytes`, ignoring a peer that went away (MSG_NOSIGNAL: no SIGPIPE).
    public func send(_ bytes: [UInt8]) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(rawValue, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            done += n
        }
    }

    /// Reads until the peer closes, `limit` bytes arrive, or `seconds` pass without data.
    public func receiveAll(limit: Int, timeoutSeconds seconds: Int32) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while out.count < limit {
            var poller = pollfd(fd: rawValue, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, seconds * 1000)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { return nil }
            let n = buffer.withUnsafeMutableBytes { Glibc.recv(rawValue, $0.baseAddress!, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }
}
