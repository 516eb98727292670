import Foundation
import VaultSystem

/// The tables of docs/FORMAT.md's "Test vectors" section, read as rows: the input column's text as
/// written, and the bytes the output column gives.
///
/// An output is one or more parts joined by ` ‖ `; a part is hex in backticks (`` `0a0b` ``) or a
/// repeated byte (`` 16 × `aa` ``). Anything else in the section that starts with `|` must be a row of
/// such a table, so that a row the parser cannot read fails instead of going unchecked.
struct VectorTable {
    struct Row {
        /// The line of the document, from 1, for messages.
        let line: Int
        let input: String
        let output: [UInt8]
    }

    enum ReadError: Error, CustomStringConvertible {
        case noSection(String)
        case badRow(line: Int, String)

        var description: String {
            switch self {
            case .noSection(let heading): return "no section \"\(heading)\" in the document"
            case .badRow(let line, let why): return "line \(line): \(why)"
            }
        }
    }

    static let heading = "## Test vectors"
    static let columns = ["input", "output"]

    /// Every row of every table in the section, in document order.
    static func rows(inDocument text: String) throws -> [Row] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: heading) else { throw ReadError.noSection(heading) }
        var rows: [Row] = []
        var expectsSeparator = false
        for i in (start + 1)..<lines.count {
            let line = lines[i]
            if line.hasPrefix("## ") { break }
            guard line.hasPrefix("|") else { continue }
            let number = i + 1
            let cells = try self.cells(of: line, line: number)
            if cells == columns {
                expectsSeparator = true
            } else if expectsSeparator {
                guard cells.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0 == "-" || $0 == ":" } }) else {
                    throw ReadError.badRow(line: number, "a table's header is not followed by its separator")
                }
                expectsSeparator = false
            } else {
                rows.append(Row(line: number, input: cells[0], output: try bytes(ofOutput: cells[1], line: number)))
            }
        }
        return rows
    }

    private static func cells(of line: String, line number: Int) throws -> [String] {
        guard line.hasSuffix("|"), line.count >= 2 else {
            throw ReadError.badRow(line: number, "a table row starts and ends with |")
        }
        let cells = line.dropFirst().dropLast().split(separator: "|", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard cells.count == columns.count else {
            throw ReadError.badRow(line: number, "\(cells.count) cells, not \(columns.count)")
        }
        return cells
    }

    /// The bytes an output cell gives (see the type's comment for the notation).
    static func bytes(ofOutput cell: String, line: Int = 0) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for part in cell.components(separatedBy: " ‖ ") {
            let pieces = part.components(separatedBy: " × ")
            let count: Int
            let hexPart: String
            switch pieces.count {
            case 1:
                (count, hexPart) = (1, pieces[0])
            case 2:
                guard let n = Int(pieces[0]), n > 0 else {
                    throw ReadError.badRow(line: line, "\"\(part)\": a repeat count is a positive decimal number")
                }
                (count, hexPart) = (n, pieces[1])
            default:
                throw ReadError.badRow(line: line, "\"\(part)\" is neither `hex` nor n × `hh`")
            }
            guard hexPart.count >= 4, hexPart.first == "`", hexPart.last == "`",
                let value = [UInt8](hex: String(hexPart.dropFirst().dropLast())), !value.isEmpty,
                count == 1 || value.count == 1,
                hexPart.dropFirst().dropLast().allSatisfy({ "0123456789abcdef".contains($0) })
            else {
                throw ReadError.badRow(line: line, "\"\(part)\" is neither `hex` (lower case) nor n × `hh`")
            }
            for _ in 0..<count { bytes += value }
        }
        return bytes
    }
}
