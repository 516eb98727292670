import Glibc

/// A failed system call: the errno it set and what was being done.
public struct SystemError: Error, CustomStringConvertible, Equatable {
    public let errno: Int32
    public let operation: String
    public let path: String?

    public init(errno: Int32, operation: String, path: String? = nil) {
        self.errno = errno
        self.operation = operation
        self.path = path
    }

    public var description: String {
        let reason = String(cString: strerror(errno))
        if let path { return "\(operation) \(path): \(reason)" }
        return "\(operation): \(reason)"
    }
}

/// Runs a system call, retrying on EINTR, and turns -1 into a thrown `SystemError`.
@discardableResult
@inline(__always)
public func retryingEINTR<T: BinaryInteger>(_ operation: String, path: String? = nil, _ body: () -> T) throws -> T {
    while true {
        let r = body()
        if r == -1 {
            let e = Glibc.errno
            if e == EINTR { continue }
            throw SystemError(errno: e, operation: operation, path: path)
        }
        return r
    }
}
