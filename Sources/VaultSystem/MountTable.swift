import Glibc

/// The mounts this process sees, read from /proc/self/mountinfo.
public enum MountTable {
    public struct Entry {
        /// The mount's device number as the kernel writes it ("0:40"); a FUSE mount's read-ahead
        /// window lives under /sys/class/bdi/<device>.
        public let device: String
        public let mountpoint: String
        public let fileSystemType: String
        public let source: String
        public let readOnly: Bool
    }

    public static func entries() -> [Entry] {
        guard let bytes = try? FileSystem.readFile("/proc/self/mountinfo") else { return [] }
        return parse(String(decoding: bytes, as: UTF8.self))
    }

    /// Vaultaire's own mounts (fstype fuse.vaultaire; the source is the vault directory).
    public static func vaultaireMounts() -> [Entry] {
        entries().filter { $0.fileSystemType == "fuse.vaultaire" }
    }

    /// The mount now visible at `mountpoint` (the last one listed: a later mount on the same place hides earlier ones).
    public static func mount(at mountpoint: String, among listed: [Entry] = entries()) -> Entry? {
        listed.last { $0.mountpoint == mountpoint }
    }

    /// Lines are: id parent major:minor root mountpoint options [optional fields] - fstype source super-options.
    public static func parse(_ text: String) -> [Entry] {
        var out: [Entry] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count > 5, let dash = fields.firstIndex(of: "-"), dash > 5, dash + 2 < fields.count else {
                continue
            }
            out.append(
                Entry(
                    device: fields[2], mountpoint: unescape(fields[4]), fileSystemType: fields[dash + 1],
                    source: unescape(fields[dash + 2]), readOnly: fields[5].split(separator: ",").contains("ro")))
        }
        return out
    }

    /// mountinfo writes space, tab, newline and backslash as \ooo octal escapes.
    public static func unescape(_ s: String) -> String {
        var out: [UInt8] = []
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            if u[i] == 92, i + 3 < u.count,
                let v = UInt8(String(decoding: u[(i + 1)...(i + 3)], as: UTF8.self), radix: 8)
            {
                out.append(v)
                i += 4
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
