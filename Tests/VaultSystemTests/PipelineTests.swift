import Glibc
import XCTest

@testable import VaultSystem

/// Two stages on two threads: every batch arrives, in order; the first failure of either stage stops
/// the other and is the one thrown; the calling thread runs the stage it was given.
final class PipelineTests: XCTestCase {
    struct Refused: Error, Equatable { var what: String }

    func testEveryBatchArrivesInOrder() throws {
        let (sent, received) = try Pipeline.run(
            callingThread: .makes,
            make: { send in
                for i in 0..<1000 { XCTAssertTrue(send(i)) }
                return 1000
            },
            use: { receive in
                var got: [Int] = []
                while let batches = receive() { got += batches }
                return got
            })
        XCTAssertEqual(sent, 1000)
        XCTAssertEqual(received, Array(0..<1000))
    }

    func testAFailureOfTheUserStopsTheMakerAndIsThrown() {
        let sends = Guarded(0)
        XCTAssertThrowsError(
            try Pipeline.run(
                callingThread: .uses,
                make: { send in
                    // Ten seconds of batches, unless told to stop.
                    while sends.withLock({ $0 }) < 100_000, send(0) {
                        sends.withLock { $0 += 1 }
                        usleep(100)
                    }
                },
                use: { receive in
                    _ = receive()
                    throw Refused(what: "upload 2")
                })
        ) { XCTAssertEqual($0 as? Refused, Refused(what: "upload 2")) }
        XCTAssertLessThan(sends.withLock { $0 }, 100_000, "the maker went on after the user failed")
    }

    func testAFailureOfTheMakerEndsTheUserAndIsThrown() {
        let received = Guarded([Int]())
        XCTAssertThrowsError(
            try Pipeline.run(
                callingThread: .makes,
                make: { send in
                    _ = send(1)
                    throw Refused(what: "download 2")
                },
                use: { receive in
                    while let batches = receive() { received.withLock { $0 += batches } }
                })
        ) { XCTAssertEqual($0 as? Refused, Refused(what: "download 2")) }
        XCTAssertTrue([[], [1]].contains(received.withLock { $0 }), "\(received.withLock { $0 })")
    }

    func testTheFirstFailureIsTheOneThrown() {
        XCTAssertThrowsError(
            try Pipeline.run(
                callingThread: .makes,
                make: { send in
                    _ = send(1)
                    // Waits until the user has failed, then fails too.
                    while send(2) { usleep(1000) }
                    throw Refused(what: "second")
                },
                use: { receive in
                    _ = receive()
                    throw Refused(what: "first")
                })
        ) { XCTAssertEqual($0 as? Refused, Refused(what: "first")) }
    }

    func testEachStageRunsOnTheThreadItWasGiven() throws {
        let caller = pthread_self()
        for placement in [Pipeline.CallingThread.makes, .uses] {
            let (makerHere, userHere) = try Pipeline.run(
                callingThread: placement,
                make: { (send: (Int) -> Bool) in pthread_equal(pthread_self(), caller) != 0 },
                use: { (receive: () -> [Int]?) in pthread_equal(pthread_self(), caller) != 0 })
            XCTAssertEqual([makerHere, userHere], [placement == .makes, placement == .uses], "\(placement)")
        }
    }

    func testSideBySideRunsTheFirstHereAndThrowsTheFirstErrorInArgumentOrder() {
        let caller = pthread_self()
        XCTAssertThrowsError(
            try SideBySide.run(
                {
                    XCTAssertNotEqual(pthread_equal(pthread_self(), caller), 0, "the first runs on the calling thread")
                    throw Refused(what: "first")
                }, { throw Refused(what: "second") })
        ) { XCTAssertEqual($0 as? Refused, Refused(what: "first")) }
    }

    func testAMakerWithACapacityWaitsForTheUser() throws {
        let taken = Guarded(0)
        var furthestAhead = 0
        let (_, received) = try Pipeline.run(
            callingThread: .makes, capacity: 2,
            make: { send in
                for i in 0..<200 {
                    XCTAssertTrue(send(i))
                    furthestAhead = max(furthestAhead, i + 1 - taken.withLock { $0 })
                }
            },
            use: { receive in
                var got: [Int] = []
                while let batches = receive() {
                    usleep(500)
                    got += batches
                    taken.withLock { $0 = got.count }
                }
                return got
            })
        XCTAssertEqual(received, Array(0..<200), "every batch, in order")
        // Two waiting, and at most two more taken but not yet counted.
        XCTAssertLessThanOrEqual(furthestAhead, 4, "batches made ahead of the user")
    }
}
