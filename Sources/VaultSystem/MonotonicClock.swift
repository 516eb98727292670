import Glibc

/// CLOCK_MONOTONIC: time that only moves forward, for durations (idle time, rates, timeouts).
public enum MonotonicClock {
    public static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    public static func seconds() -> Double { Double(nanoseconds()) / 1e9 }
}
