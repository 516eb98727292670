import Glibc
import VaultSystem

/// Progress of long work on a terminal: one line on standard error — how much is done (of how much,
/// when known), the rate and the time left — redrawn in place at most ten times a second. Nothing is
/// drawn when standard error is not a terminal, or with `--quiet`.
final class ProgressMeter {
    enum Unit {
        case bytes
        case files
    }

    private let total: Int?
    private let unit: Unit
    private let enabled: Bool
    private let start = MonotonicClock.seconds()
    private var lastDraw = 0.0
    private var lastDrawn: Int?

    /// - Parameters:
    ///   - total: what `done` will reach, if known (a pipe's length is not).
    ///   - quiet: `--quiet` was given.
    init(total: Int?, unit: Unit, quiet: Bool) {
        self.total = total
        self.unit = unit
        enabled = !quiet && standardErrorIsTerminal
    }

    func update(_ done: Int) {
        guard enabled else { return }
        let now = MonotonicClock.seconds()
        guard now - lastDraw >= 0.1 || done == total else { return }
        lastDraw = now
        lastDrawn = done
        printError("\r" + line(done, elapsed: now - start) + "\u{1B}[K", newline: false)
    }

    /// Draws the final state and ends the line, if anything was drawn.
    func finish(_ done: Int) {
        guard enabled else { return }
        if lastDrawn != nil && lastDrawn != done {
            lastDraw = 0
            update(done)
        }
        if lastDrawn != nil { printError("") }
    }

    func line(_ done: Int, elapsed: Double) -> String {
        var text = unit == .bytes ? amount(done) : "\(done)"
        if let total, total > 0 {
            text += " of \(amount(total)) (\(min(100, done * 100 / total))%)"
        } else if unit == .files {
            text += " files"
        }
        guard elapsed > 0.2, done > 0 else { return text }
        let rate = Double(done) / elapsed
        text += ", " + (unit == .bytes ? amount(Int(rate)) : "\(Int(rate)) files") + "/s"
        if let total, total > done { text += ", " + clock(Double(total - done) / rate) + " left" }
        return text
    }

    func amount(_ n: Int) -> String {
        guard unit == .bytes else { return "\(n) files" }
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var i = 0
        while value >= 1024 && i < units.count - 1 {
            value /= 1024
            i += 1
        }
        if i == 0 { return "\(n) B" }
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) \(units[i])"
    }

    func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60)
        let two = { (v: Int) in v < 10 ? "0\(v)" : "\(v)" }
        return h > 0 ? "\(h):\(two(m)):\(two(sec))" : "\(m):\(two(sec))"
    }
}

extension CommonOptions {
    static let quiet = CommandSpec.Option(
        long: "quiet", short: "q", valueName: nil,
        help: "No progress line (it is shown only when standard error is a terminal).")
}
