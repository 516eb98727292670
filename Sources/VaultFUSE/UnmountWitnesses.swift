import Glibc
import VaultSystem

/// Tells `vaultaire unmount` how locking went. The unmount command connects before it asks the kernel
/// to unmount; once the vault is persisted and wiped (or persisting failed), every connected command
/// gets one line — "ok", or "error: " and what could not be saved — so that it reports the mount
/// process's real result instead of assuming success. The socket is abstract, named after the mount's
/// device number, and answers only its own user (and root).
public final class UnmountWitnesses: @unchecked Sendable {  // `clients` and `finished` only under `lock`
    public static func socketName(device: String) -> String { "vaultaire-unmount/\(device)" }

    private let listener: FileDescriptorHandle
    private let lock = Mutex()
    private var clients: [FileDescriptorHandle] = []
    private var finished = false

    /// Listens for the mount on `device`; nil if the name is taken (then unmount falls back to
    /// waiting for the vault lock).
    init?(device: String) {
        guard let listener = try? LocalSocket.listen(name: UnmountWitnesses.socketName(device: device)) else {
            return nil
        }
        self.listener = listener
        startAccepting()
    }

    /// Sends the result to every waiting command.
    func finish(_ error: Error?) {
        let line = error.map { "error: \($0)\n" } ?? "ok\n"
        lock.withLock {
            acceptPending(wait: 0)
            finished = true
            for client in clients { client.send(Array(line.utf8)) }
            clients = []
        }
    }

    private func startAccepting() {
        BackgroundThread.start(named: "vaultaire-unmnt") { [self] in
            while true {
                var poller = pollfd(fd: listener.rawValue, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, -1) >= 0 || errno == EINTR else { return }
                let done = lock.withLock { () -> Bool in
                    if !finished { acceptPending(wait: 0) }
                    return finished
                }
                if done { return }
            }
        }
    }

    /// Takes every connection waiting now. Caller holds `lock`.
    private func acceptPending(wait milliseconds: Int32) {
        while true {
            var poller = pollfd(fd: listener.rawValue, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, milliseconds) > 0 else { return }
            guard let client = LocalSocket.accept(from: listener) else { return }
            guard let uid = LocalSocket.peerUID(client.rawValue), uid == getuid() || uid == 0 else { continue }
            clients.append(client)
        }
    }
}
