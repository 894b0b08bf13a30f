import Config
import Control
import Foundation
import PhotolalaCore

/// `photolalactl status --all`: every instance that has a config (config.md "Instances"),
/// asked in turn through the socket its config names, one row each.
package enum InstanceList {
    static let directory = Instance.configDirectory

    package struct Row: Encodable {
        /// nil: photolalad.service, the instance without a name.
        var instance: String?
        var config: String
        package var socket: String
        /// The daemon's answer, or nil with `error`.
        package var status: DaemonStatus?
        package var error: String?
        /// `ControlClient.Failure` as its exit code (3 down, 4 refused, 1 other), nil when it
        /// answered or when it is not set up.
        package var failureCode: Int32?
        var needs: [String]

        package var name: String { instance ?? "photolalad" }

        enum CodingKeys: String, CodingKey { case instance, config, socket, running, error, needs, status }

        package func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(instance, forKey: .instance)
            try c.encode(config, forKey: .config)
            try c.encode(socket, forKey: .socket)
            try c.encode(status != nil || failureCode == 4, forKey: .running)
            try c.encode(error, forKey: .error)
            try c.encode(needs, forKey: .needs)
            try c.encode(status, forKey: .status)
        }
    }

    /// The config files of `directory` in name order, photolalad.toml first; a file whose
    /// name cannot be an instance's is a row with the reason.
    static func configs(in directory: String = directory) -> [(file: String, instance: Result<Instance?, Instance.NameProblem>)] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted { a, b in
            a == "photolalad.toml" ? b != "photolalad.toml" : (b == "photolalad.toml" ? false : a < b)
        }
        return names.compactMap { name in
            Instance.owning(fileName: name).map { (directory + "/" + name, $0) }
        }
    }

    package static func ask(in directory: String = directory, timeout: TimeInterval) -> [Row] {
        configs(in: directory).map { (file: String, owner: Result<Instance?, Instance.NameProblem>) -> Row in
            switch owner {
            case .failure(let problem):
                return Row(instance: problem.name, config: file, socket: "", status: nil,
                           error: "not an instance: the name \(problem.why)", failureCode: 1, needs: [])
            case .success(let instance):
                var client = CtlOptions.client(configPath: file, instance: instance)
                client.timeout = timeout
                let status: DaemonStatus
                do {
                    status = try client.call(.status, as: DaemonStatus.self)
                } catch let error as ControlClient.Failure {
                    // A daemon that is not running on a file it would refuse is not set up
                    // (the shipped photolalad.toml, when only instances are used): said, but
                    // not a daemon down.
                    if case .notRunning = error, let why = notSetUp(file, instance) {
                        return Row(instance: instance?.name, config: file, socket: client.socketPath, status: nil,
                                   error: "not set up: \(why)", failureCode: nil, needs: [])
                    }
                    return Row(instance: instance?.name, config: file, socket: client.socketPath, status: nil,
                               error: error.description, failureCode: CtlFailure.code(error), needs: [])
                } catch {
                    return Row(instance: instance?.name, config: file, socket: client.socketPath, status: nil,
                               error: "\(error)", failureCode: 1, needs: [])
                }
                return Row(instance: instance?.name, config: file, socket: client.socketPath, status: status, error: nil,
                           failureCode: nil, needs: status.userNeeds)
            }
        }
    }

    /// Why the daemon would refuse `file`, or nil when the file is good (or unreadable to
    /// this user: then it may well be set up).
    static func notSetUp(_ file: String, _ instance: Instance?) -> String? {
        guard FileManager.default.isReadableFile(atPath: file) else { return nil }
        do {
            _ = try ConfigLoader.load(path: file, instance: instance)
            return nil
        } catch {
            return error.problems.first.map { "\($0)" } ?? "invalid"
        }
    }

    /// 3 when a daemon is down, else 4 when one refused this user, else 1 for another
    /// failure; with `check`, then 1 when something needs the user; else 0.
    package static func exitCode(_ rows: [Row], check: Bool) -> Int32 {
        let codes = rows.compactMap(\.failureCode)
        if codes.contains(3) { return 3 }
        if codes.contains(4) { return 4 }
        if codes.contains(1) { return 1 }
        if check && rows.contains(where: { !$0.needs.isEmpty }) { return 1 }
        return 0
    }

    /// One line each: the instance, its account, what is backed up, what needs the user.
    package static func table(_ rows: [Row]) -> String {
        let cells: [[String]] = rows.map { row in
            guard let s = row.status else { return [row.name, row.error ?? "?"] }

            let account = s.account.signedIn ? "signed in \(s.account.userId.map { String($0.prefix(8)) } ?? "")" : "not signed in"
            let backedUp = "\(s.queue.uploaded) backed up (\(Units.humanBytes(s.queue.uploadedBytes)))"
                + (s.queue.pending + s.queue.hashing + s.queue.uploading > 0
                   ? ", \(s.queue.pending + s.queue.hashing + s.queue.uploading) waiting" : "")
            let needs = row.needs.first.map { $0 + (row.needs.count > 1 ? " (+\(row.needs.count - 1) more)" : "") }
                ?? "nothing needs you"
            return [row.name, account, backedUp, needs]
        }
        var widths = [Int](repeating: 0, count: 3)
        for line in cells where line.count == 4 {
            for i in 0..<3 { widths[i] = max(widths[i], line[i].count) }
        }
        widths[0] = max(widths[0], cells.map { $0[0].count }.max() ?? 0)
        return cells.map { line in
            line.enumerated().map { i, cell in
                i < line.count - 1 && i < 3 ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) : cell
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }

    package static func json(_ rows: [Row]) -> String {
        struct All: Encodable { var instances: [Row] }
        return String(decoding: (try? ControlJSON.encode(All(instances: rows), pretty: true)) ?? [], as: UTF8.self) + "\n"
    }
}
