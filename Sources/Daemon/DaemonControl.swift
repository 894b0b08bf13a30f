#if canImport(Glibc)
import Glibc
#endif
import Audit
import Control
import Account
import Foundation
import Ingest
import Inventory
import Keys
import Mirror
import Notify
import PhotolalaCore
import Queue
import RestoreRelay
import Web

/// Answers the control socket's calls by asking the part each belongs to. Changes go
/// through the queue (retry) or the part itself (rescan, sign-in); whatever a change
/// wakes, the queue's signals and the status feed carry.
struct DaemonControl: ControlHandler {
    let core: DaemonCore
    let account: AccountService
    let ingest: IngestService
    let inventory: InventoryService
    let restore: RestoreService
    let metrics: MetricsScraper
    let notify: NotifyService
    let audit: AuditTrail
    let keys: KeyService
    let web: WebService
    let mirror: MirrorService

    var database: QueueDatabase { core.database }

    func handle(_ request: ControlRequest) async -> ControlResponse {
        switch request.route {
        case .status:
            let status = await core.status()
            guard !request.privileged else { return .json(status) }
            var check = ListingCheck(caller: request.peer.accessCaller)
            let settings = await core.settings
            let thisDevice = Set([settings.account.deviceName, HostName.current(), status.manifest?.deviceId].compactMap { $0 })
            return .json(status.seen(canList: { check.canList($0) }, thisDevice: thisDevice))
        case .metrics:
            return ControlResponse(status: 200, body: await metrics.scrape(), contentType: MetricsExposition.contentType)
        case .pause:
            do {
                try await core.setUserPaused(true)
                audited(.pause, request, .ok)
                return .json(ControlReply(ok: true, message: "Uploads paused. Hashing goes on; run `photolalactl resume` to continue."))
            } catch {
                audited(.pause, request, .failed, ["error": .string("\(error)")])
                return .error(500, "internal", "could not save the pause: \(error)")
            }
        case .resume:
            do {
                try await core.setUserPaused(false)
                await account.resume()
                audited(.resume, request, .ok)
                return .json(ControlReply(ok: true, message: "Uploads resumed."))
            } catch {
                audited(.resume, request, .failed, ["error": .string("\(error)")])
                return .error(500, "internal", "could not save the resume: \(error)")
            }
        case .rescan:
            await ingest.rescanAll(reason: "photolalactl rescan")
            audited(.rescan, request, .ok)
            return .json(ControlReply(ok: true, message: "Rescanning every watched folder."))
        case .queue:
            return await queue(request)
        case .retry:
            return await retry(request)
        case .logout:
            let asked = request.body.isEmpty ? LogoutRequest() : (try? ControlJSON.decode(LogoutRequest.self, from: request.body))
            guard let asked else { return .error(400, "bad_request", "expected {\"forgetKey\": true or false}") }
            if !asked.forgetKey, let hold = await keys.logoutHold() {
                audited(.logout, request, .refused, ["why": "recovery key never shown on this NAS"])
                return .error(409, "recovery_key_not_shown", hold)
            }
            let signedOut = await account.logout(by: request.caller)
            if let problem = await keys.forget() { return .error(500, "internal", "\(signedOut.message) But \(problem)") }
            return .json(ControlReply(ok: true, message: signedOut.message))
        case .loginIdentityToken, .loginDeviceStart, .loginDevicePoll, .loginDeviceCancel:
            return await login(request)
        case .verify:
            return await verify(request)
        case .verifyProgress:
            return await verifyProgress()
        case .files:
            return await files(request)
        case .devices, .manifest, .restoreObjects, .restoreListing, .restoreThaw, .restoreObject, .restoreSession, .restoreExport,
             .restoreExportReport:
            let response = await restore.answer(request)
            // A restore's report is what status shows of it.
            if request.route == .restoreSession { core.changed() }
            return response
        case .notifyTest:
            return .json(await notify.test())
        case .audit:
            let limit = min(AuditListing.maxLimit, max(1, Int(request.query["limit"] ?? "") ?? AuditListing.defaultLimit))
            let since = request.query["since"].flatMap(Int64.init).map { Date(timeIntervalSince1970: Double($0) / 1000) }
            let (records, more) = await audit.records(since: since, limit: limit)
            return .json(AuditListing(records: records, more: more))
        case .auditVerify:
            return .json(await audit.verify())
        case .auditSealed:
            return Self.stream(await audit.sealedMaterial())
        case .auditVerificationKey:
            guard let shown = await audit.verificationKey() else {
                return .error(503, "unavailable", "the audit trail's sealing key cannot be read now: the journal says why (journalctl -u photolalad)")
            }
            return .json(VerificationKeyView(verificationKey: shown.key?.text, fingerprint: shown.fingerprint,
                                             createdAt: Timestamp.string(Date(timeIntervalSince1970: Double(shown.createdAt) / 1000)),
                                             shownAt: shown.shownAt.map { Timestamp.string(Date(timeIntervalSince1970: Double($0) / 1000)) }))
        case .auditVerificationKeyTaken:
            guard let body = try? ControlJSON.decode(VerificationKeyTaken.self, from: request.body) else {
                return .error(400, "bad_request", "expected {\"fingerprint\": ...}")
            }
            guard await audit.verificationKeyTaken(fingerprint: body.fingerprint, by: request.caller) else {
                return .error(409, "not_pending", "no verification key with fingerprint \(body.fingerprint) waits to be shown")
            }
            return .json(ControlReply(ok: true, message: "This NAS no longer keeps the verification key."))
        case .recoveryKey, .recoveryKeyEnter, .recoveryKeyRotate, .recoveryKeyNewAccountKey:
            return await recoveryKey(request)
        case .webLink:
            do {
                let view = try await web.link(uid: request.peer.uid)
                audited(.webChange, request, .ok, ["action": "link", "remote": "control socket"])
                return .json(view)
            } catch {
                return .error(409, "web_unavailable", "No link: \(error.description).")
            }
        case .webRevoke:
            await web.revoke()
            audited(.webChange, request, .ok, ["action": "revoke", "remote": "control socket"])
            return .json(ControlReply(ok: true, message: "Every session of the status page has ended; `photolalactl web --link` opens a new one."))
        case .mirror:
            let limit = min(MirrorListing.maxLimit, max(1, Int(request.query["limit"] ?? "") ?? MirrorListing.defaultLimit))
            // Names of files only for root and the daemon's user (privacy.md "Names only for
            // those who may read them": an adopted file keeps the user's own name).
            let names = request.peer.uid == 0 || request.peer.uid == getuid()
            let (status, lists) = await mirror.listing(limit: limit, names: names)
            func items(_ name: String) -> [MirrorListing.Item] {
                (lists[name] ?? []).map { e in
                    MirrorListing.Item(md5: e.md5.hex, size: e.size, path: e.path, storageClass: e.storageClass,
                                       date: Timestamp.string(Date(timeIntervalSince1970: TimeInterval(MirrorPlan.date(of: e)))),
                                       lastError: e.lastError, refusals: e.refusals)
                }
            }
            return .json(MirrorListing(mirror: status, pending: items("pending"), archived: items("archived"), refused: items("refused"),
                                       onlyHere: items("onlyHere"), limit: limit))
        case .mirrorPass:
            return .json(ControlReply(ok: true, message: await mirror.requestPass()))
        case .mirrorRefill:
            let (ok, message) = await mirror.refill(by: request.caller)
            return ok ? .json(ControlReply(ok: true, message: message)) : .error(409, "mirror_off", message)
        }
    }

    /// `GET /v1/audit/sealed`: the material's header, then each file as it was when opened.
    static func stream(_ material: AuditMaterial) -> ControlResponse {
        .stream { writer in
            defer { material.close() }
            let header = material.header
            do {
                try await writer.begin(contentType: "application/octet-stream",
                                       contentLength: Int64(header.count) + material.parts.reduce(0) { $0 + $1.size })
                try await writer.write(header)
                var chunk = [UInt8](repeating: 0, count: 256 << 10)
                for part in material.parts {
                    var offset: Int64 = 0
                    while offset < part.size {
                        let want = Int(min(Int64(chunk.count), part.size - offset))
                        let n = retryingInterrupts { chunk.withUnsafeMutableBytes { pread(part.fd, $0.baseAddress, want, off_t(offset)) } }
                        // A file cut meanwhile: the answer ends short, and the command says so.
                        guard n > 0 else { return }
                        try await writer.write(Array(chunk[0..<n]))
                        offset += Int64(n)
                    }
                }
                try await writer.finish()
            } catch {
                return
            }
        }
    }

    /// Who asked for a change, in the audit trail (the uid the kernel gave the socket).
    private func audited(_ kind: AuditEvent.Kind, _ request: ControlRequest, _ outcome: AuditOutcome, _ details: AuditDetails = [:]) {
        audit.record(AuditEvent(kind, by: request.caller, outcome, details))
    }

    /// `photolalactl retry`: the queue wakes the stages that take the files and photos back.
    private func retry(_ request: ControlRequest) async -> ControlResponse {
        do {
            let (files, photos, _) = try await database.retryFailed()
            core.changed()
            audited(.retry, request, .ok, ["files": .int(Int64(files)), "photos": .int(Int64(photos))])
            return .json(ControlReply(ok: true, message: Self.retried(files: files, photos: photos)))
        } catch {
            audited(.retry, request, .failed, ["error": .string("\(error)")])
            return .error(500, "internal", "could not retry: \(error)")
        }
    }

    static func retried(files: Int, photos: Int) -> String {
        let filesPart = files == 0 ? "No failed files" : "\(files) failed file\(files == 1 ? "" : "s") put back in the queue"
        let photosPart = photos == 0 ? "no photo without a preview"
            : "\(photos) photo\(photos == 1 ? "" : "s") without a preview will be read again"
        return "\(filesPart); \(photosPart)."
    }

    /// `photolalactl queue [--failed] [--limit N]`.
    private func queue(_ request: ControlRequest) async -> ControlResponse {
        let limit = min(10_000, max(1, Int(request.query["limit"] ?? "") ?? 100))
        let failedOnly = request.query["failed"].map { $0 == "1" || $0 == "true" } ?? false
        do {
            var (items, total) = try await database.listing(failedOnly: failedOnly, limit: limit)
            if !request.privileged {
                var check = ListingCheck(caller: request.peer.accessCaller)
                items = items.filter { check.mayName($0.path) }
            }
            return .json(QueueListing(items: items.map {
                QueueListing.Item(path: $0.path, state: $0.state.publicName, size: $0.size, md5: $0.md5, attempts: $0.attempts,
                                  lastError: $0.lastError, updatedAt: Timestamp.string($0.updatedAt))
            }, total: total))
        } catch {
            return .error(500, "internal", "cannot read the queue: \(error)")
        }
    }

    /// The sign-in calls, answered by the account service.
    private func login(_ request: ControlRequest) async -> ControlResponse {
        switch request.route {
        case .loginIdentityToken:
            guard let body = try? ControlJSON.decode(IdentityTokenLogin.self, from: request.body), !body.identityToken.isEmpty else {
                return .error(400, "bad_request", "expected {\"identityToken\": ..., \"authorizationCode\": ...}")
            }
            // Known to the redactor from the moment they arrive: a backend refusal that
            // quotes them is logged, recorded and answered without them. A JWT's payload
            // and signature too: quoted alone, the payload still holds the Apple id.
            for secret in [body.identityToken, body.authorizationCode] + Self.tokenParts(body.identityToken) {
                SecretRedactor.shared.register(secret)
            }
            let (userId, error) = await account.loginWithIdentityToken(body.identityToken, authorizationCode: body.authorizationCode,
                                                                      by: request.caller)
            if let userId { return .json(await withKey(LoginProgress(state: .signedIn, userId: userId))) }
            return .json(LoginProgress(state: .failed, message: error.map(SecretRedactor.shared.redact)))
        case .loginDeviceStart:
            return .json(Self.progress(await account.startPairing(by: request.caller)))
        case .loginDevicePoll:
            return .json(await withKey(Self.progress(await account.pairingView())))
        case .loginDeviceCancel:
            await account.cancelPairing(by: request.caller)
            return .json(Self.progress(await account.pairingView()))
        default:
            return .error(404, "not_found", "not a sign-in call")
        }
    }

    /// A sign-in's answer waits (a few seconds at most) for the account key to settle, so
    /// `login` can say whether this NAS made it (keep the recovery key) or must be given it.
    private func withKey(_ progress: LoginProgress) async -> LoginProgress {
        guard progress.state == .signedIn, let userId = progress.userId else { return progress }
        var progress = progress
        if let outcome = await keys.settled(for: userId, within: 15) {
            progress.recovery = outcome.state
            progress.accountKeyCreated = outcome.created
        }
        return progress
    }

    /// `photolalactl recovery-key`, `--enter`, `--rotate`: the key service answers and
    /// records each in the audit trail (never the key).
    private func recoveryKey(_ request: ControlRequest) async -> ControlResponse {
        let caller = AuditActor.caller(uid: request.peer.uid)
        do throws(RecoveryKeyRefusal) {
            switch request.route {
            case .recoveryKeyEnter:
                guard let body = try? ControlJSON.decode(RecoveryKeyEntry.self, from: request.body) else {
                    return .error(400, "bad_request", "expected {\"recoveryKey\": ...}")
                }
                let fingerprint = try await keys.enter(body.recoveryKey, by: caller)
                return .json(ControlReply(ok: true, message: "Recovery key accepted: this NAS holds the account key (fingerprint \(fingerprint)); its manifest is written from now on."))
            case .recoveryKeyRotate:
                return .json(Self.view(try await keys.rotate(by: caller)))
            case .recoveryKeyNewAccountKey:
                let done = try await keys.newAccountKey(by: caller)
                var view = Self.view(done.shown)
                view.previousFingerprint = done.previousFingerprint
                view.sealed = done.sealed
                view.devices = done.devices
                view.unreadable = done.unreadable
                return .json(view)
            default:
                return .json(Self.view(try await keys.recoveryKey(by: caller)))
            }
        } catch {
            let status = switch error {
            case .malformed, .wrongKey, .keyObjectReplaced, .superseded: 400
            case .bucket: 503
            case .local: 500
            default: 409
            }
            return .error(status, error.code, error.description)
        }
    }

    static func view(_ shown: ShownRecoveryKey) -> RecoveryKeyView {
        RecoveryKeyView(recoveryKey: shown.recoveryKey.formatted, fingerprint: shown.fingerprint,
                        createdAt: Timestamp.string(shown.createdAt), outdated: shown.outdated)
    }

    /// A JWT's payload and signature (its header names only the algorithm and key).
    static func tokenParts(_ token: String) -> [String] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return [] }
        return parts.dropFirst().map(String.init)
    }

    static func progress(_ v: AccountService.PairingView) -> LoginProgress {
        LoginProgress(state: LoginProgress.State(rawValue: v.outcome) ?? .failed, userCode: v.userCode,
                      verificationUri: v.verificationUri, verificationUriComplete: v.verificationUriComplete,
                      expiresAt: v.expiresAt.map(Timestamp.string), userId: v.userId, message: v.message)
    }

    // MARK: - Verify and files
    // `verify` (the inventory stage does it; the command polls its progress) and `files`
    // (a read of the queue, a page at a time).

    func verify(_ request: ControlRequest) async -> ControlResponse {
        let asked: VerifyRequest
        if request.body.isEmpty {
            asked = VerifyRequest()
        } else if let body = try? ControlJSON.decode(VerifyRequest.self, from: request.body) {
            asked = body
        } else {
            return .error(400, "bad_request", "expected {\"deep\": PERCENT or null}")
        }
        if let deep = asked.deep, !(deep > 0 && deep <= 100) {
            return .error(400, "bad_request", "--deep takes a share of the objects from 0 (excluded) to 100 percent")
        }
        guard await account.isSignedIn else {
            audited(.verify, request, .refused, ["why": "not signed in"])
            return .error(409, "not_signed_in", "photolalad is not signed in, so there is no bucket to verify: run `photolalactl login`")
        }
        // The inventory records the verify it begins, and its result, as the caller's.
        return .json(await inventory.requestVerify(deepPercent: asked.deep, by: request.caller))
    }

    func verifyProgress() async -> ControlResponse {
        .json(await inventory.verifyProgress())
    }

    func files(_ request: ControlRequest) async -> ControlResponse {
        guard let asked = try? ControlJSON.decode(FilesRequest.self, from: request.body) else {
            return .error(400, "bad_request", "expected {\"path\": \"/absolute/path\", \"after\": null, \"limit\": N}")
        }
        let folders = await core.settings.watch.folders
        guard let path = WatchedPath.resolve(asked.path, folders: folders, realPath: Self.realPath) else {
            let list = folders.isEmpty ? "none is set" : folders.joined(separator: ", ")
            return .error(400, "outside", "\(asked.path) is not under a watched folder (\(list)): photolalad backs up only what is under watch.folders")
        }
        let limit = min(1000, max(1, asked.limit ?? 500))
        var records: [FileRecord] = []
        var next: String?
        var hidden = false
        if request.privileged {
            do {
                records = try await database.files(at: path, after: asked.after, limit: limit)
            } catch {
                return .error(500, "internal", "cannot read the queue: \(error)")
            }
            next = records.count == limit ? records.last?.path : nil
        } else {
            // A member of the group is told only of names below folders it could list.
            var check = ListingCheck(caller: request.peer.accessCaller)
            var isFolder: ObjCBool = false
            let folder = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue
            guard check.mayName(path), !folder || check.canList(path) else {
                return .error(403, "forbidden", "permission denied: you cannot list \(folder ? path : PathAccess.parent(of: path)), so photolalad tells you nothing of what is in it (root and the daemon's user may ask)")
            }
            var after = asked.after
            do {
                // Pages of the queue, skipping what the member may not see, until a page is full.
                while records.count < limit {
                    let page = try await database.files(at: path, after: after, limit: limit)
                    let shown = page.filter { check.mayName($0.path) }
                    hidden = hidden || shown.count < page.count
                    records += shown.prefix(limit - records.count)
                    guard page.count == limit, let last = page.last?.path else { break }
                    after = last
                }
            } catch {
                return .error(500, "internal", "cannot read the queue: \(error)")
            }
            // The next page starts after the last name shown: never after a name the member may not see.
            next = records.count == limit ? records.last?.path : nil
        }
        let userId = await account.userId
        let items = records.map { r in
            FileListing.Item(path: r.path, state: r.state.publicName, size: r.size, md5: r.md5,
                             key: r.md5.flatMap { md5 in userId.map { "photos/\($0)/\(md5).dat" } },
                             uploadedAt: r.uploadedAt.map(Timestamp.string), lastError: r.state == .uploaded ? nil : r.lastError)
        }
        var note: String?
        if hidden {
            note = "only files below folders you could list are shown (root and the daemon's user see them all)"
        } else if asked.after == nil && records.isEmpty {
            note = Self.untracked(path)
        }
        return .json(FileListing(items: items, next: next, note: note))
    }

    /// Why nothing is known at `path`, in words.
    static func untracked(_ path: String) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return "no such file or folder, and photolalad knows of nothing there"
        }
        if isDirectory.boolValue { return "no photo or video under this folder is known to photolalad yet (a scan may still be on its way)" }
        return "not backed up: photolalad does not track this file (not a photo or video by its extension, hidden, excluded by watch.exclude, or not seen yet)"
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
