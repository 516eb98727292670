import Glibc
import XCTest

@testable import VaultSystem

/// Work spread over threads that wait: every index runs once, on several threads at once; the first
/// failure stops the indices not yet taken and is thrown.
final class WaitingThreadsTests: XCTestCase {
    struct Refused: Error {}

    func testEveryIndexRunsOnceOnSeveralThreads() throws {
        let runs = Guarded([Int](repeating: 0, count: 500))
        let threads = Guarded(Set<UInt>())
        try WaitingThreads.forEach(500, threads: 8) { i in
            usleep(200)  // waiting, as a sync does, so that the threads overlap
            runs.withLock { $0[i] += 1 }
            threads.withLock { _ = $0.insert(UInt(pthread_self())) }
        }
        XCTAssertEqual(runs.withLock { $0 }, [Int](repeating: 1, count: 500))
        XCTAssertGreaterThan(threads.withLock { $0.count }, 1)
    }

    func testAFailureStopsTheRestAndIsThrown() {
        let runs = Guarded(0)
        XCTAssertThrowsError(
            try WaitingThreads.forEach(10_000, threads: 4) { i in
                runs.withLock { $0 += 1 }
                if i == 10 { throw Refused() }
                usleep(100)
            }
        ) { XCTAssertTrue($0 is Refused) }
        XCTAssertLessThan(runs.withLock { $0 }, 10_000)
    }

    func testNothingToDoRunsNothing() throws {
        try WaitingThreads.forEach(0, threads: 4) { _ in XCTFail("ran") }
    }
}
