import Dispatch

/// Two pieces of work run at once, on two threads, for the machine's other core: each result (or the
/// first error, in argument order) as if they had run one after the other.
public enum SideBySide {
    public static func run<A, B>(_ first: () throws -> A, _ second: () throws -> B) throws -> (A, B) {
        try withoutActuallyEscaping(first) { first in
            try withoutActuallyEscaping(second) { second in
                let job = Pair(first, second)
                DispatchQueue.concurrentPerform(iterations: 2) { job.run($0) }
                return (try job.a!.get(), try job.b!.get())
            }
        }
    }

    /// Each iteration writes only its own result, which is read only after both have ended.
    private final class Pair<A, B>: @unchecked Sendable {
        let first: () throws -> A
        let second: () throws -> B
        var a: Result<A, Error>?
        var b: Result<B, Error>?
        init(_ first: @escaping () throws -> A, _ second: @escaping () throws -> B) {
            self.first = first
            self.second = second
        }
        func run(_ which: Int) {
            if which == 0 { a = Result { try first() } } else { b = Result { try second() } }
        }
    }
}
