internal import CFuseRing
import Glibc

/// Each worker thread's buffer for read replies, kept for the thread's life instead of allocated and
/// freed per request, and zeroed when the thread ends (libfuse ends its workers at unmount). So the
/// plaintext a read decrypts lives in at most one buffer per worker, overwritten by the next read,
/// instead of scattering through freed heap memory for as long as the mount runs.
enum ReplyBuffers {
    /// The mount's `max_read`: the kernel never asks for more in one request.
    static let capacity = 1 << 20

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { raw in
            guard let raw else { return }
            explicit_bzero(raw, ReplyBuffers.capacity)
            free(raw)
        }
        return key
    }()

    /// Runs `body` with this thread's buffer, `size` bytes of it. A request larger than `capacity`
    /// (which the kernel does not send) gets a buffer of its own, zeroed after use.
    static func withBuffer<R>(size: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        if let inPlace = vaultaire_ring_reply_buffer(size) {
            // A request that came through io_uring: its reply is built where the kernel takes it from.
            return try body(UnsafeMutableRawBufferPointer(start: inPlace, count: size))
        }
        guard size <= capacity else {
            let own = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
            defer {
                explicit_bzero(own.baseAddress!, size)
                own.deallocate()
            }
            return try body(own)
        }
        var raw = pthread_getspecific(key)
        if raw == nil {
            guard let fresh = malloc(capacity) else { fatalError("out of memory for a read buffer") }
            pthread_setspecific(key, fresh)
            raw = fresh
        }
        return try body(UnsafeMutableRawBufferPointer(start: raw, count: size))
    }
}
