import VaultSystem

/// A command's arguments after parsing: positionals in order, options by long name.
struct ParsedArguments {
    /// The command these arguments are for (its spec's name).
    var command: String? = nil
    var positionals: [String] = []
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var repeated: [String: [String]] = [:]

    func value(_ name: String) -> String? { values[name] }
    func has(_ name: String) -> Bool { flags.contains(name) }
}

/// What a command accepts, which also renders its help.
struct CommandSpec {
    struct Option {
        let long: String
        let short: Character?
        let valueName: String?
        let help: String
        var repeatable = false
    }

    let name: String
    let overview: String
    let usage: String
    let arguments: [(String, String)]
    let options: [Option]
    let minimumPositionals: Int
    let maximumPositionals: Int

    static let helpOption = Option(long: "help", short: "h", valueName: nil, help: "Show help information.")

    /// The options as written, and `--extpass` wherever `--passphrase-file` is: both give the current
    /// credential, so every command that takes one takes the other.
    var allOptions: [Option] {
        guard let i = options.firstIndex(where: { $0.long == CommonOptions.passphraseFile.long }) else {
            return options
        }
        var all = options
        all.insert(CommonOptions.extpass, at: i + 1)
        return all
    }

    var help: String {
        var out = "OVERVIEW: \(overview)\n\nUSAGE: \(usage)\n"
        if !arguments.isEmpty {
            out += "\nARGUMENTS:\n"
            for (n, h) in arguments { out += "  \(n.padding(28))\(h)\n" }
        }
        out += "\nOPTIONS:\n"
        for o in allOptions + [CommandSpec.helpOption] {
            var flag = o.short.map { "-\($0), " } ?? ""
            flag += "--\(o.long)"
            if let v = o.valueName { flag += " <\(v)>" }
            out += "  \(flag.padding(28))\(o.help)\n"
        }
        return out
    }

    func parse(_ args: [String]) throws -> ParsedArguments {
        var parsed = ParsedArguments(command: name)
        let options = self.allOptions
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            i += 1
            if onlyPositionals || a == "-" || !a.hasPrefix("-") {
                parsed.positionals.append(a)
                continue
            }
            if a == "--" {
                onlyPositionals = true
                continue
            }
            var name: String
            var inlineValue: String?
            if a.hasPrefix("--") {
                name = String(a.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    inlineValue = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
            } else {
                guard a.count == 2, let o = (options + [CommandSpec.helpOption]).first(where: { $0.short == a.last })
                else {
                    throw CLIError.usage("unknown option '\(a)'", command: self.name)
                }
                name = o.long
            }
            if name == "help" { throw CLIError.helpRequested(self) }
            guard let option = options.first(where: { $0.long == name }) else {
                throw CLIError.usage("unknown option '--\(name)'", command: self.name)
            }
            if option.valueName != nil {
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard i < args.count else {
                        throw CLIError.usage("option '--\(name)' needs a value", command: self.name)
                    }
                    value = args[i]
                    i += 1
                }
                if option.repeatable {
                    parsed.repeated[name, default: []].append(value)
                } else {
                    parsed.values[name] = value
                }
            } else {
                guard inlineValue == nil else {
                    throw CLIError.usage("option '--\(name)' takes no value", command: self.name)
                }
                parsed.flags.insert(name)
            }
        }
        guard parsed.positionals.count >= minimumPositionals else {
            throw CLIError.usage("missing argument", command: name)
        }
        guard parsed.positionals.count <= maximumPositionals else {
            throw CLIError.usage("unexpected argument '\(parsed.positionals[maximumPositionals])'", command: name)
        }
        return parsed
    }
}

extension String {
    /// Left-aligned in `width` columns, with at least one space after.
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}

extension ParsedArguments {
    /// A positive integer option, or `fallback`.
    func integer(_ name: String, default fallback: Int, command: String) throws -> Int {
        guard let v = value(name) else { return fallback }
        guard let n = Int(v.replacingOccurrences(of: "_", with: "")), n > 0 else {
            throw CLIError.usage("--\(name) needs a positive whole number, got '\(v)'", command: command)
        }
        return n
    }
}
