import Dispatch
import Foundation
import PhotolalaCore

/// One preview worker process as the daemon sees it: started on first use, asked one photo
/// at a time, and started again — after the project's `Backoff` — whenever it dies. A
/// crash or a time-out costs the photo being read its preview, never the daemon.
package actor PreviewWorkerSlot {
    package enum Outcome: Sendable, Equatable {
        /// The worker answered: a thumbnail and date, or why it could not read this photo.
        case read(WorkerMessage.Reply)
        /// The worker died or hung on this photo (a crash, its CPU or memory limit, a
        /// time-out): the sentence says which.
        case crashed(String)
        /// No worker could be started (or it is waiting out its backoff): not the photo's fault.
        case unavailable(String)
    }

    package struct Options: Sendable, Equatable {
        /// The program started as the worker (this very binary).
        package var executable: String = "/proc/self/exe"
        package var limits = PreviewLimits()
        /// Wall-clock time one photo may take, whatever the worker says.
        package var timeout: Duration = .seconds(60)
        /// A fresh process after this many photos: memory back to where it started.
        package var photosPerProcess = 500
        package init() {}
    }

    private let options: Options
    private var process: WorkerProcess?
    /// The process a read is waiting on (the actor is free meanwhile: `interrupt` reaches it).
    private var current: WorkerProcess?
    private var served = 0
    private var restarts = Backoff(base: 0.25, cap: 30, jitter: .equal)
    private var notBefore: ContinuousClock.Instant?
    /// The current (or last) worker's process id.
    package private(set) var lastPID: pid_t = 0

    package init(options: Options = Options()) {
        self.options = options
    }

    /// Reads the photo behind `fd` (kept open by the caller until this returns).
    package func read(fd: Int32, _ request: WorkerMessage.Request) async -> Outcome {
        if let notBefore, ContinuousClock.now < notBefore {
            try? await Task.sleep(until: notBefore, clock: .continuous)
        }
        if process == nil {
            let options = options
            let started: Result<WorkerProcess, WorkerProcess.Failure> = await Blocking.run {
                Result { () throws(WorkerProcess.Failure) in
                    try WorkerProcess.start(executable: options.executable, limits: options.limits, timeout: .seconds(30))
                }
            }
            switch started {
            case .success(let p):
                process = p
                lastPID = p.pid
                served = 0
            case .failure(let failure):
                noteDeath()
                return .unavailable(Self.sentence(failure))
            }
        }
        guard let process else { return .unavailable("no preview worker") }
        let timeout = options.timeout
        current = process
        defer { current = nil }
        let answer: Result<WorkerMessage.Reply, WorkerProcess.Failure> = await Blocking.run {
            Result { () throws(WorkerProcess.Failure) in try process.exchange(request, fd: fd, timeout: timeout) }
        }
        switch answer {
        case .success(let reply):
            restarts.reset()
            served += 1
            if served >= options.photosPerProcess { stop() }
            return .read(reply)
        case .failure(let failure):
            self.process = nil
            noteDeath()
            return .crashed(Self.sentence(failure))
        }
    }

    /// Ends the photo being read now (a stop must not wait for a slow decoder).
    package nonisolated func interrupt() async {
        await interruptCurrent()
    }

    private func interruptCurrent() {
        current?.interrupt()
    }

    /// Stops the worker (shutdown, or `catalog.enabled` turned off).
    package func stop() {
        process?.stop()
        process = nil
    }

    private func noteDeath() {
        let delay = restarts.fail(random: .random(in: 0..<1))
        notBefore = ContinuousClock.now + Backoff.duration(delay)
    }

    static func sentence(_ failure: WorkerProcess.Failure) -> String {
        switch failure {
        case .died(let why): why
        case .timedOut: "the decoder took too long and was stopped"
        case .garbled(let what): "the decoder answered nonsense (\(what))"
        }
    }
}
