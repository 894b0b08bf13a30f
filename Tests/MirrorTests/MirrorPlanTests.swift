import ManifestFormat
import PhotolalaCore
import Testing
import Mirror

@Suite struct MirrorPlanTests {
    let md5 = MD5Value(hex: "0123456789abcdef0123456789abcdef")!

    func listed(size: Int64 = 100, storageClass: String = "STANDARD", modified: Int64? = 1_700_000_000) -> MirrorPlan.Listed {
        MirrorPlan.Listed(md5: md5, size: size, storageClass: storageClass, modified: modified)
    }

    @Test func aNewObjectIsPendingArchivedOrOwn() {
        guard case .insert(let e) = MirrorPlan.listed(listed(), entry: nil, own: false, include: .others) else { Issue.record("no insert"); return }
        #expect(e.state == .pending && e.size == 100 && e.modified == 1_700_000_000 && !e.gone)
        guard case .insert(let a) = MirrorPlan.listed(listed(storageClass: "DEEP_ARCHIVE"), entry: nil, own: false, include: .all) else { return }
        #expect(a.state == .archived)
        guard case .insert(let g) = MirrorPlan.listed(listed(storageClass: "GLACIER_IR"), entry: nil, own: false, include: .all) else { return }
        #expect(g.state == .pending, "GLACIER_IR is read at once")
        guard case .insert(let o) = MirrorPlan.listed(listed(), entry: nil, own: true, include: .others) else { return }
        #expect(o.state == .own)
        guard case .insert(let all) = MirrorPlan.listed(listed(), entry: nil, own: true, include: .all) else { return }
        #expect(all.state == .pending, "include = all copies this NAS's own photos too")
    }

    @Test func aQuietListingChangesNothing() {
        let e = MirrorEntry(md5: md5, size: 100, modified: 1_700_000_000, state: .pending)
        #expect(MirrorPlan.listed(listed(), entry: e, own: false, include: .others) == .none)
        let copied = MirrorEntry(md5: md5, size: 100, path: "2023/11/x.jpg", state: .copied)
        #expect(MirrorPlan.listed(listed(size: 999, storageClass: "GLACIER"), entry: copied, own: true, include: .others) == .none,
                "a checked copy is not changed by what the bucket says later")
    }

    @Test func anObjectBackInTheAccountIsNoLongerOnlyHere() {
        let e = MirrorEntry(md5: md5, size: 100, path: "a", state: .copied, gone: true)
        guard case .update(let u) = MirrorPlan.listed(listed(), entry: e, own: false, include: .others) else { Issue.record("no update"); return }
        #expect(!u.gone && u.state == .copied)
    }

    @Test func ownFollowsTheWatchedFiles() {
        let own = MirrorEntry(md5: md5, size: 100, modified: 1_700_000_000, state: .own)
        guard case .update(let p) = MirrorPlan.listed(listed(), entry: own, own: false, include: .others) else { Issue.record("no update"); return }
        #expect(p.state == .pending, "no watched file holds it any more: it is copied")
        let pending = MirrorEntry(md5: md5, size: 100, modified: 1_700_000_000, state: .pending)
        guard case .update(let o) = MirrorPlan.listed(listed(), entry: pending, own: true, include: .others) else { return }
        #expect(o.state == .own)
    }

    @Test func otherBytesUnderTheKeyStartOver() {
        let refused = MirrorEntry(md5: md5, size: 100, modified: 1_700_000_000, state: .refused, attempts: 2, refusals: 3,
                                  nextAttemptAt: 5, lastError: "x")
        guard case .update(let u) = MirrorPlan.listed(listed(size: 120), entry: refused, own: false, include: .others) else { return }
        #expect(u.size == 120 && u.refusals == 0 && u.attempts == 0 && u.nextAttemptAt == nil && u.lastError == nil)
    }

    @Test func archiveClassesComeAndGo() {
        let pending = MirrorEntry(md5: md5, size: 100, modified: 1_700_000_000, state: .pending)
        guard case .update(let a) = MirrorPlan.listed(listed(storageClass: "GLACIER"), entry: pending, own: false, include: .all) else { return }
        #expect(a.state == .archived)
        let thawing = MirrorEntry(md5: md5, size: 100, storageClass: "GLACIER", modified: 1_700_000_000, state: .thawing, thawAskedAt: 10)
        #expect(MirrorPlan.listed(listed(storageClass: "GLACIER"), entry: thawing, own: false, include: .all) == .none)
        var thawed = thawing
        thawed.state = .pending
        #expect(MirrorPlan.listed(listed(storageClass: "GLACIER"), entry: thawed, own: false, include: .all) == .none,
                "asked back and readable: still listed GLACIER, still to fetch")
        guard case .update(let back) = MirrorPlan.listed(listed(), entry: thawing, own: false, include: .all) else { return }
        #expect(back.state == .pending && back.thawAskedAt == nil)
    }

    @Test func theAccountLosingAnObject() {
        let pending = MirrorEntry(md5: md5, size: 1, state: .pending)
        #expect(MirrorPlan.lost(pending, onCloudDelete: .trash) == .forget)
        let copied = MirrorEntry(md5: md5, size: 1, path: "p", state: .copied)
        guard case .mark(let kept) = MirrorPlan.lost(copied, onCloudDelete: .keep) else { Issue.record("not kept"); return }
        #expect(kept.gone && kept.state == .copied, "kept, counted as only here")
        #expect(MirrorPlan.lost(kept, onCloudDelete: .keep) == .none, "already counted: nothing written")
        #expect(MirrorPlan.lost(copied, onCloudDelete: .trash) == .trash(copied))
        let removed = MirrorEntry(md5: md5, size: 1, path: "p", state: .removed)
        guard case .mark(let r) = MirrorPlan.lost(removed, onCloudDelete: .trash) else { return }
        #expect(r.gone && r.state == .removed, "nothing here to move")
    }

    @Test func theCatalogDatesWhatIsNotWrittenYet() {
        let pending = MirrorEntry(md5: md5, size: 1, modified: 5, state: .pending)
        let dated = MirrorPlan.dated(pending, catalogDate: 1_600_000_000, ext: "heic")
        #expect(dated?.catalogDate == 1_600_000_000 && dated?.ext == "heic")
        #expect(MirrorPlan.date(of: dated!) == 1_600_000_000)
        #expect(MirrorPlan.dated(dated!, catalogDate: 1_600_000_000, ext: "heic") == nil, "unchanged: nothing to write")
        var named = pending
        named.path = "1970/01/x.bin"
        #expect(MirrorPlan.dated(named, catalogDate: 1, ext: "jpg") == nil, "a name given is kept")
        let odd = MirrorEntry(md5: md5, size: 1, modified: 1_700_000_000, catalogDate: 5_000_000_000, state: .pending)
        #expect(MirrorPlan.date(of: odd) == 1_700_000_000, "a catalog date outside 1970–2099 falls back to the object's time")
    }
}
