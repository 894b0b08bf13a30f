"""Reliability, network faults (issue 7, suite 3): S3 reached through the fault proxy
and a backend that fails, while photos keep arriving.

- A 503 storm (every request answered SlowDown): every upload backs off together, the
  backoff shows in status (JSON and the human form), the requests made during the storm
  stay few (a handful of probes, not a steady stream), nothing is marked failed, and
  everything goes up once the storm ends.
- Seconds of latency on every request (no request may be repeated: timeouts must not
  fire early), then resets, 503s and truncated answers mixed: everything uploaded once,
  with MD5 = key, total requests within a small factor of the minimum.
- A black hole that accepts connections and never answers: the request timeouts fire,
  the daemon keeps answering `status`, and everything goes up once it is gone.
- The backend answering 500 and then hanging on `sts-token` and `credential-state`:
  the STS credentials in hand are used until they expire (and never after: the proxy
  refuses expired keys), status shows `backoff`, the daemon never pauses, backend calls
  time out and back off, and uploads resume by themselves once the backend heals.

Every object is read back and its MD5 checked against its key; every log is scanned for
secrets (World.close)."""
from __future__ import annotations

import math
import threading
import time
from collections import Counter

import pytest

from support.world import settled, write_photo

MiB = 1 << 20
SMALL_MULTIPART = {"multipart_threshold": "5MiB", "part_size": "5MiB"}


class Sampler:
    """Reads `status --json` (and every `human_every`-th time the human form) in the
    background, with how long each answer took: what a user watching would have seen."""

    def __init__(self, d, interval: float = 0.5, human_every: int = 4):
        self.d, self.interval, self.human_every = d, interval, human_every
        self.samples: list[tuple[float, dict, float]] = []
        self.human: list[tuple[float, str]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(30)

    def _run(self):
        i = 0
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                s = self.d.status()
                self.samples.append((time.time(), s, time.monotonic() - t0))
                if i % self.human_every == 0:
                    self.human.append((time.time(), self.d.ctl("status", check=True).stdout))
            except Exception as e:  # noqa: BLE001 - recorded and asserted on
                self.errors.append(f"{type(e).__name__}: {e}")
            i += 1
            self._stop.wait(self.interval)

    def between(self, t0: float, t1: float) -> list[dict]:
        return [s for t, s, _ in self.samples if t0 <= t <= t1]

    @property
    def slowest(self) -> float:
        return max((dt for _, _, dt in self.samples), default=0.0)


def writes(world, since: float = 0.0) -> list[dict]:
    return [r for r in world.s3_ops(since) if r["op"] in ("PutObject", "UploadPart", "CreateMultipartUpload",
                                                           "CompleteMultipartUpload")]


def minimal_requests(n_small: int, n_multipart_parts: list[int]) -> int:
    """A PUT per small file; Create + parts + Complete per multipart one (whether an object
    is already there, the listing made after the sign-in answers)."""
    return n_small + sum(2 + p for p in n_multipart_parts)


# ---- a 503 storm --------------------------------------------------------------------------

@pytest.mark.reliability("network")
def test_503_storm_backs_off_together_and_recovers(world, reliability, long_run):
    storm = 120.0 if long_run else 25.0
    d = world.daemon(config={"upload": SMALL_MULTIPART})
    uid = world.login(d)
    first = [write_photo(d.photos / "before" / f"b{i:02d}.jpg", 20_000 + 977 * i) for i in range(10)]
    d.wait_for(settled(len(first)), timeout=60, what="the first photos")

    world.proxy.set_faults(slowdown_rate=1.0)
    t_storm = time.time()
    bodies = list(first)
    with Sampler(d) as sampler:
        # Photos keep arriving through the storm: 200 small ones and a 3-part video.
        for i in range(200):
            bodies.append(write_photo(d.photos / "storm" / f"s{i:03d}.jpg", 20_000 + 131 * i))
        bodies.append(write_photo(d.photos / "storm" / "clip.mov", 2 * 5 * MiB + 4321))
        time.sleep(max(0.0, t_storm + storm - time.time()))
        t_clear = time.time()
        world.proxy.clear_faults()
        # The next probe is due at most one backoff step (here ≤ storm/2) after the last.
        d.wait_for(settled(len(bodies)), timeout=60 + storm, interval=0.5, what="every photo after the storm")
        t_done = time.time()

    during = world.s3_ops(t_storm)
    during = [r for r in during if r["time"] < t_clear]
    storm_samples = sampler.between(t_storm + 5, t_clear)
    assert not sampler.errors, sampler.errors[:3]
    # Backoff visible: status says S3 is being retried, with when and why.
    backoff = [s for s in storm_samples if (s.get("s3") or {}).get("state") == "backoff"]
    assert len(backoff) >= len(storm_samples) * 0.8, [s.get("s3") for s in storm_samples][:5]
    last = backoff[-1]["s3"]
    assert last["failures"] >= 3 and last["nextAttemptAt"] and "503" in last["lastError"], last
    human = [h for t, h in sampler.human if t_storm + 5 <= t <= t_clear]
    assert human and all("retrying" in h and "Waiting for S3" in h for h in human), human[-1:]
    # Never paused, never failed, no photo given up on.
    assert all(s["state"] == "running" and s["pauseReason"] is None for _, s, _ in sampler.samples)
    assert all(s["queue"]["failed"] == 0 for _, s, _ in sampler.samples)
    # No retry storm: after the uploads in flight when it began (4 workers × 3 tries),
    # one object is probed per backoff step (each up to 3 tries), the steps doubling
    # from 0.5 s: log2(storm) + 2 probes at most.
    probes = math.ceil(math.log2(storm)) + 2
    bound = 3 * (4 + probes)
    assert len(during) <= bound, (len(during), Counter(r["op"] for r in during))
    # Afterwards: S3 healthy again in status, every photo once, MD5 = key.
    s = d.status()
    assert s["s3"]["state"] == "ok" and s["queue"]["failed"] == 0
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    recovered = t_done - t_clear
    assert recovered < 30 + storm / 2, recovered

    reliability.describe(
        injected=f"every S3 request answered 503 SlowDown for {storm:.0f} s while 200 photos and a 3-part video arrived",
        times=f"{len(during)} requests refused",
        checked="status `s3.state` = backoff with failures, next attempt and the 503 (and the human status says "
                f"\"Waiting for S3 … retrying\"); requests during the storm ≤ {bound}; never paused, nothing failed; "
                "afterwards every photo uploaded once with MD5 = key")
    reliability.figure("requests during the storm", len(during))
    reliability.figure("bound", bound)
    reliability.figure("recovery s", round(recovered, 1))


# ---- S3 refusing every credential -------------------------------------------------------------

@pytest.mark.reliability("network")
def test_s3_refusing_every_credential_does_not_storm_the_backend(world, reliability, long_run):
    refusal = 90.0 if long_run else 20.0
    d = world.daemon()
    uid = world.login(d)
    first = [write_photo(d.photos / "before" / f"b{i:02d}.jpg", 20_000 + 977 * i) for i in range(10)]
    d.wait_for(settled(len(first)), timeout=60, what="the first photos")
    sts_before = world.backend.stats()["calls"]["sts-token"]["count"]

    # Every request answered 400 ExpiredToken, whatever the keys (a revoked role session,
    # a backend vending keys S3 does not take): fetching new credentials does not help.
    world.proxy.set_faults(expired_token_count=1_000_000)
    t0 = time.time()
    bodies = list(first)
    with Sampler(d) as sampler:
        for i in range(200):
            bodies.append(write_photo(d.photos / "refused" / f"r{i:03d}.jpg", 20_000 + 131 * i))
        time.sleep(max(0.0, t0 + refusal - time.time()))
        t_clear = time.time()
        world.proxy.clear_faults()
        sts_during = world.backend.stats()["calls"]["sts-token"]["count"] - sts_before
        d.wait_for(settled(len(bodies)), timeout=120, interval=0.5, what="every photo once S3 takes the keys again")
        t_done = time.time()
    assert not sampler.errors, sampler.errors[:3]
    during = [r for r in world.s3_ops(t0) if r["time"] < t_clear]
    assert all(s["state"] == "running" and s["queue"]["failed"] == 0 for _, s, _ in sampler.samples)
    backoff = [s["s3"] for s in sampler.between(t0 + 5, t_clear) if s["s3"]["state"] == "backoff"]
    assert backoff and "ExpiredToken" in backoff[-1]["lastError"], [s["s3"] for s in sampler.between(t0 + 5, t_clear)][-1:]
    # One credential fetch per probe at most (plus the first round of the 4 workers).
    probes = math.ceil(math.log2(refusal)) + 2
    assert sts_during <= 4 + probes, sts_during
    assert len(during) <= 3 * (4 + probes), (len(during), Counter(r["op"] for r in during))
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    assert t_done - t_clear < 60

    reliability.describe(
        injected=f"every S3 request answered 400 ExpiredToken for {refusal:.0f} s, fresh keys or not, while 200 photos arrived",
        times=f"{len(during)} requests refused",
        checked=f"sts-token calls during it ≤ {4 + probes}, S3 requests ≤ {3 * (4 + probes)} (no storm against the "
                "backend or S3); status s3 = backoff naming ExpiredToken; never paused, nothing failed; afterwards "
                "every photo uploaded with MD5 = key")
    reliability.figure("sts-token calls", sts_during)
    reliability.figure("S3 requests", len(during))
    reliability.figure("recovery s", round(t_done - t_clear, 1))


# ---- latency, then resets, 503s and truncated answers -------------------------------------------

@pytest.mark.reliability("network")
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_latency_then_resets_503s_and_truncated_answers(world, reliability, long_run, scheme):
    mixed_for = 90.0 if long_run else 30.0
    d = world.daemon(config={"upload": SMALL_MULTIPART})
    uid = world.login(d)
    d.wait_for(lambda s: s["inventory"]["state"] == "ok", timeout=30, what="the listing after the sign-in")

    # Phase 1: 3 s of latency on every request. Slow is not broken: nothing may be
    # repeated (no timeout fires early) and nothing is reported as failing.
    world.proxy.set_faults(latency=3.0)
    t_lat = time.time()
    slow = [write_photo(d.photos / "slow" / f"l{i}.jpg", 40_000 + 313 * i) for i in range(8)]
    slow.append(write_photo(d.photos / "slow" / "video.mp4", 5 * MiB + 777))   # 2 parts
    with Sampler(d) as sampler:
        d.wait_for(settled(len(slow)), timeout=120, interval=0.5, what="the photos under latency")
    lat_ops = world.s3_ops(t_lat)
    tries = Counter((r["op"], r["path"]) for r in lat_ops)
    assert max(tries.values()) == 1, tries.most_common(3)
    assert len(lat_ops) == minimal_requests(8, [2]), Counter(r["op"] for r in lat_ops)
    assert all((s.get("s3") or {}).get("state") == "ok" for _, s, _ in sampler.samples)
    assert sampler.slowest < 5, f"status took {sampler.slowest:.1f} s to answer"

    # Phase 2: resets, 503s and truncated answers (after the request took effect upstream),
    # with 1 s of latency, while photos and two multipart videos keep arriving.
    world.proxy.set_faults(latency=1.0, slowdown_rate=0.15, reset_rate=0.1, truncate_rate=0.1, seed=7)
    t_mixed = time.time()
    bodies = list(slow)
    small = 0
    with Sampler(d) as sampler:
        for j in range(2):
            bodies.append(write_photo(d.photos / "mixed" / f"v{j}.mov", 2 * 5 * MiB + 999 + j))   # 3 parts
        while time.time() - t_mixed < mixed_for:
            bodies.append(write_photo(d.photos / "mixed" / f"m{small:03d}.jpg", 30_000 + 701 * small))
            small += 1
            time.sleep(0.5)
        t_clear = time.time()
        world.proxy.clear_faults()
        d.wait_for(settled(len(bodies)), timeout=120, interval=0.5, what="every photo after the mixed faults")
    assert not sampler.errors, sampler.errors[:3]
    assert all(s["queue"]["failed"] == 0 and s["state"] == "running" for _, s, _ in sampler.samples)

    st = world.proxy.stats()
    faults = st["faults"]
    assert faults["reset"] > 0 and faults["slowdown"] > 0 and faults["truncated"] > 0, faults
    mixed_ops = world.s3_ops(t_mixed)
    minimal = minimal_requests(small, [3, 3])
    # Each request fails ~35% of the time: about 1.5 tries each; a retry loop would be many more.
    assert len(mixed_ops) <= 3 * minimal, (len(mixed_ops), minimal, Counter(r["op"] for r in mixed_ops))
    sent = Counter((r["op"], r["path"]) for r in mixed_ops if r["op"] in ("PutObject", "UploadPart"))
    assert max(sent.values()) <= 8, sent.most_common(3)
    objects = world.objects(uid)
    assert set(objects) == {world.key(uid, b) for b in bodies}
    # A CreateMultipartUpload whose answer was cut off leaves an upload S3 knows and the
    # daemon does not (it cannot list uploads): at most one per such cut.
    cut_creates = sum(1 for r in mixed_ops if r["op"] == "CreateMultipartUpload" and r["fault"] == "truncated")
    leftover = world.moto.s3_admin().list_multipart_uploads(Bucket=world.moto.bucket).get("Uploads", [])
    assert len(leftover) <= cut_creates, (leftover, cut_creates)

    reliability.describe(
        injected=f"over {scheme.upper()}: 3 s latency on every request (9 photos, one multipart); then for "
                 f"{mixed_for:.0f} s 1 s latency with 15% 503 SlowDown, 10% TCP resets and 10% answers cut off after "
                 "S3 acted, while photos and two 3-part videos arrived",
        times=f"{faults['slowdown']} 503s, {faults['reset']} resets, {faults['truncated']} truncated answers",
        checked="under latency: no request repeated, exactly the minimal requests, S3 reported ok, status answered; "
                f"mixed: every photo uploaded with MD5 = key, nothing failed, requests ≤ 3 × minimal ({minimal}), "
                "no body sent more than 8 times, open multipart uploads ≤ truncated CreateMultipartUpload answers")
    reliability.figure("requests (mixed)", len(mixed_ops))
    reliability.figure("minimal (mixed)", minimal)
    reliability.figure("photos", len(bodies))


# ---- a black hole ---------------------------------------------------------------------------------

@pytest.mark.reliability("network")
def test_black_hole_timeouts_fire_and_uploads_resume(world, reliability, long_run):
    # Requests without a body get 60 s (S3Client.Configuration.minimumRequestTimeout):
    # hold the black hole longer than that so the time-outs have to fire.
    hole = 150.0 if long_run else 66.0
    d = world.daemon(config={"upload": SMALL_MULTIPART})
    uid = world.login(d)
    first = [write_photo(d.photos / f"a{i}.jpg", 25_000 + i) for i in range(5)]
    d.wait_for(settled(len(first)), timeout=60, what="the first photos")

    world.proxy.set_faults(blackhole=True)
    t_hole = time.time()
    bodies = list(first)
    with Sampler(d, interval=1.0) as sampler:
        for i in range(30):
            bodies.append(write_photo(d.photos / "hole" / f"h{i:02d}.jpg", 30_000 + 211 * i))
        bodies.append(write_photo(d.photos / "hole" / "clip.mov", 5 * MiB + 3))
        time.sleep(max(0.0, t_hole + hole - time.time()))
        log_in_hole = d.log()
        t_clear = time.time()
        world.proxy.clear_faults()
        d.wait_for(settled(len(bodies)), timeout=120, interval=0.5, what="every photo after the black hole")
        t_done = time.time()
    assert not sampler.errors, sampler.errors[:3]
    # The daemon stayed responsive and nothing was given up on.
    assert sampler.slowest < 5, f"status took {sampler.slowest:.1f} s to answer"
    assert all(s["state"] == "running" and s["queue"]["failed"] == 0 for _, s, _ in sampler.samples)
    # Time-outs fired (the requests did not simply wait for the hole to close).
    timeouts = log_in_hole.count('error=Timeout')
    assert timeouts >= 1, log_in_hole[-3000:]
    swallowed = world.proxy.stats()["faults"]["blackhole"]
    # At most the 4 workers' requests and their retries went into the hole: 4 × 3.
    assert 1 <= swallowed <= 12, swallowed
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    assert d.status()["queue"]["failed"] == 0

    reliability.describe(
        injected=f"a black hole for {hole:.0f} s: the proxy accepts every connection, reads the request and never "
                 "answers; 31 photos arrive meanwhile",
        times=f"{swallowed} requests swallowed",
        checked="request time-outs fire (logged) while the hole lasts; at most 4 workers × 3 tries go into it; status "
                "answers within 5 s throughout; nothing failed; once it is gone every photo uploaded with MD5 = key")
    reliability.figure("time-outs", timeouts)
    reliability.figure("recovery s", round(t_done - t_clear, 1))


def sts_timed_out(d) -> bool:
    return any("could not get storage credentials" in line and "timed out" in line for line in d.log().splitlines())


# ---- the backend failing ----------------------------------------------------------------------------

@pytest.mark.reliability("network")
def test_backend_500s_and_hangs_keep_credentials_and_never_pause(world, reliability, long_run):
    lifetime = 60 if long_run else 30
    world.backend.configure(sts_expires_in=lifetime)
    # The proxy refuses requests signed with keys past the expiration the backend reported.
    world.proxy.expiry_lookup = world.backend.credential_expiry
    d = world.daemon(config={"credentials": {"refresh_before_expiry": f"{lifetime // 2}s", "apple_check_interval": "20s"}})
    uid = world.login(d)
    bodies = [write_photo(d.photos / "first.jpg", 33_000)]
    d.wait_for(settled(1), timeout=30, what="the first photo")
    sts = lambda: world.backend.stats()["calls"]["sts-token"]   # noqa: E731
    apple = lambda: world.backend.stats()["calls"]["credential-state"]   # noqa: E731
    issued = world.backend.sts_sessions()[-1]
    expiry = issued["expiration"]
    assert sts()["count"] == 1

    # From now on: sts-token answers 500 twice, then hangs longer than the daemon's 20 s
    # deadline; credential-state answers 500 twice, then hangs. Healed once a hang timed out.
    world.backend.fail("sts-token", status=500, error="internal_error")
    world.backend.fail("credential-state", status=500, error="internal_error")
    t_fail = time.time()
    switched = {"sts": False, "apple": False}
    healed_at = None
    i = 0
    with Sampler(d) as sampler:
        while True:
            now = time.time()
            if not switched["sts"] and sts()["statuses"].count(500) >= 2:
                world.backend.fail("sts-token", status=None, hang=40)
                switched["sts"] = True
            if not switched["apple"] and apple()["statuses"].count(500) >= 2:
                world.backend.fail("credential-state", status=None, hang=40)
                switched["apple"] = True
            if healed_at is None and switched["sts"] and sts_timed_out(d):
                world.backend.clear_faults("sts-token")
                healed_at = time.time()
            if healed_at is not None and now > expiry + 5:
                break
            assert now - t_fail < lifetime + 90, (sts(), apple())
            if i % 2 == 0:
                bodies.append(write_photo(d.photos / "drip" / f"p{i:03d}.jpg", 20_000 + 113 * i))
            i += 1
            time.sleep(0.5)
        d.wait_for(settled(len(bodies)), timeout=90, interval=0.5, what="uploads after the backend healed")
        t_done = time.time()
    assert not sampler.errors, sampler.errors[:3]

    # Never paused, never failed: a failing backend is not a reason to stop.
    assert all(s["state"] == "running" and s["pauseReason"] is None for _, s, _ in sampler.samples), \
        Counter((s["state"], s["pauseReason"]) for _, s, _ in sampler.samples)
    assert all(s["queue"]["failed"] == 0 for _, s, _ in sampler.samples)
    # Backoff visible: credentials in backoff with the next attempt and the reason.
    backoff = [s["credentials"] for _, s, _ in sampler.samples if s["credentials"]["state"] == "backoff"]
    assert backoff, Counter(s["credentials"]["state"] for _, s, _ in sampler.samples)
    reasons = " ".join(c["lastError"] or "" for c in backoff)
    assert "500" in reasons and "timed out" in reasons, reasons[:500]
    assert all(c["nextAttemptAt"] for c in backoff)
    # The Apple check failing changes nothing: still authorized, the failure shown.
    apple_states = Counter(s["appleCredential"]["state"] for _, s, _ in sampler.samples)
    assert set(apple_states) == {"authorized"}, apple_states
    assert any(s["appleCredential"]["lastError"] for _, s, _ in sampler.samples)
    # Status answered quickly while backend calls hung.
    assert sampler.slowest < 5, f"status took {sampler.slowest:.1f} s to answer"

    # Credentials kept while valid: uploads went on with the old keys after the first
    # failed refresh, up to the last moments of their life — and not one request after it.
    first_refusal = sts()["times"][1]
    ok_after = [r for r in world.s3_ops(first_refusal) if r["status"] == 200 and r["time"] < expiry]
    assert ok_after and max(r["time"] for r in ok_after) > expiry - 10, \
        (first_refusal - issued["issuedAt"], [round(r["time"] - expiry, 1) for r in ok_after][-5:])
    assert world.proxy.stats()["faults"]["expired_enforced"] == 0
    # Bounded backend traffic: exponential backoff, no retry storm.
    outage = [t for t in sts()["times"][1:] if t < healed_at]
    assert len(outage) <= 6, [round(t - t_fail, 1) for t in outage]
    checks = [t for t in apple()["times"] if t >= t_fail]
    assert len(checks) <= 3 + (t_done - t_fail) / 5, [round(t - t_fail, 1) for t in checks]
    assert sts_timed_out(d)
    s = d.status()
    assert s["credentials"]["state"] == "valid" and s["credentials"]["expiresAt"]
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}

    reliability.describe(
        injected=f"STS credentials of {lifetime} s; from the first upload on, sts-token answers 500 twice then hangs "
                 "40 s (past the daemon's 20 s deadline), credential-state answers 500 twice then hangs; "
                 "sts-token healed once a hang timed out; a photo every second",
        times=f"{len(outage)} sts-token and {len(checks)} credential-state calls failed or hung",
        checked="uploads went on with the old keys until shortly before they expired, none after (the proxy "
                "refuses expired keys); status credentials = backoff with next attempt and \"HTTP 500\" / \"timed out\"; "
                "never paused, nothing failed, Apple state still authorized; status answers within 5 s; sts-token "
                "calls ≤ 6; everything uploaded with MD5 = key once healed")
    reliability.figure("last upload before expiry, s", round(max(r["time"] for r in ok_after) - expiry, 1))
    reliability.figure("photos", len(bodies))


@pytest.mark.reliability("network")
def test_credentials_dead_on_arrival_back_off(world, reliability, long_run):
    bad_for = 60.0 if long_run else 15.0
    d = world.daemon()
    # The backend answers 200 with credentials that expire within the daemon's 5 s margin:
    # what a NAS clock hours ahead sees every time. Usable they are not; a loop they must not make.
    # Set before the sign-in: the key service asks for credentials as soon as it is signed in.
    world.backend.configure(sts_expires_in=2)
    t0 = time.time()
    uid = world.login(d)
    bodies = [write_photo(d.photos / f"p{i}.jpg", 30_000 + i) for i in range(5)]
    with Sampler(d) as sampler:
        time.sleep(bad_for)
        calls = world.backend.stats()["calls"]["sts-token"]["count"]
        world.backend.configure(sts_expires_in=None)
        t_fixed = time.time()
        d.wait_for(settled(len(bodies)), timeout=60 + bad_for, interval=0.5, what="uploads once credentials are good")
        t_done = time.time()
    assert not sampler.errors, sampler.errors[:3]
    assert all(s["state"] == "running" and s["pauseReason"] is None for _, s, _ in sampler.samples)
    backoff = [s["credentials"] for s in sampler.between(t0 + 3, t_fixed) if s["credentials"]["state"] == "backoff"]
    assert backoff and "clock" in backoff[-1]["lastError"], [s["credentials"] for s in sampler.between(t0, t_fixed)][-2:]
    # Backoff from 2 s doubling, never below half a step: fetches at 0, ≥1, ≥3, ≥7, ≥15 s…
    # — log2(bad_for) + 2 at most (a loop made hundreds).
    bound = math.ceil(math.log2(bad_for)) + 2
    assert calls <= bound, calls
    assert len([r for r in world.s3_ops() if r["method"] in ("PUT", "POST", "DELETE") and r["status"] == 200]) == len(bodies)
    assert set(world.objects(uid)) == {world.key(uid, b) for b in bodies}
    reliability.describe(
        injected=f"for {bad_for:.0f} s the backend answered sts-token with credentials expiring 2 s later (inside the "
                 "daemon's 5 s margin: dead on arrival, as for a NAS clock hours ahead)",
        times=f"{calls} credential fetches",
        checked=f"sts-token calls ≤ {bound} (backoff, not a loop); status credentials = backoff saying to check the "
                "clock; never paused; once good credentials come, every photo uploaded with MD5 = key")
    reliability.figure("sts-token calls", calls)
    reliability.figure("recovery s", round(t_done - t_fixed, 1))
