"""Disks left asleep (issue 25 item 5): a signed-in daemon with nothing to do writes nothing
to its state directory. Every periodic chore is shortened to a minute (the bucket listing,
the Apple credential check, the catalog's publish and check, the rescan, the dead man's
switch) and runs several times while nothing is new, in the bucket or on disk: over ten
minutes (issue 24 asks ten for the audit trail, issue 25 five for the disk) inotify sees no change under the state directory and the process's `write_bytes`
(/proc/PID/io, which also counts the SQLite -shm pages dirtied through the mapping) grows
by less than 4 KiB (the WAL's last pages included: they must have reached queue.db while
the disk was awake for them). The chores are checked to have run meanwhile (S3 listings and
catalog checks through the proxy, Apple checks at the backend, pings at the switch), so the quiet is not
that of a stalled daemon. A debug build names the tables a stray transaction changed
(PHOTOLALAD_TRACE_WRITES) in the failure.

Not marked `alone`: the test only waits, and other tests' load does not make the daemon write.
It runs first and holds the machine (a shared lock) only while its daemon backs up and
mirrors; then it steps out, and the alone tests run during its ten minutes: its own
daemon, idle, is no load for them."""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from support import images
from support.app_catalog import md5_hex, publish_as_app
from support.notify_receivers import Receiver
from support.run import free_port
from support.state_watch import StateWatch, filesystem_type, write_bytes
from support.world import settled, write_photo

MINUTE = "60s"
WATCH_SECONDS = 600


def test_idle_signed_in_writes_nothing_to_the_state_directory(world, machine):
    hook, switch = Receiver("json").start(), Receiver().start()
    # The daemon logs to its standard output: a pipe to journald under systemd, a file here,
    # kept on tmpfs so that `write_bytes` counts what the daemon itself puts on a disk.
    log_dir = Path(tempfile.mkdtemp(prefix="pl-idle-log-", dir="/dev/shm"))
    d = None
    try:
        d = world.daemon(start=False, config={
            "watch": {"rescan_interval": MINUTE},
            "upload": {"inventory_interval": MINUTE},
            "catalog": {"publish_interval": MINUTE, "check_interval": MINUTE},
            "credentials": {"apple_check_interval": MINUTE},
            "notify": {"webhook": hook.url("/topic"), "healthcheck_url": switch.url("/ping/idle"),
                       "healthcheck_interval": MINUTE, "repeat": MINUTE},
            # The status page served, with no page open (issue 35): it must add no write.
            "web": {"listen": f"127.0.0.1:{free_port()}"},
        }, env={"PHOTOLALAD_TRACE_WRITES": "1"})
        d.log_path = log_dir / "d.log"
        # The mirror too (issue 32): a full pass and a look at the catalog's pointer each
        # minute, a photo from a phone already copied.
        mirror = d.root / "Photolala"
        d.sections["mirror"] = {"folder": str(mirror), "check_interval": MINUTE, "list_interval": MINUTE}
        d.write_config()
        d.start()
        assert filesystem_type(d.state_dir) not in ("tmpfs", "ramfs"), "write_bytes counts nothing on a RAM filesystem"
        uid = world.login(d)
        s3 = world.moto.s3_admin()
        phone = images.encode(images.bands(240, 160, vertical=True, size=12), "JPEG")
        s3.put_object(Bucket=world.moto.bucket, Key=f"photos/{uid}/{md5_hex(phone)}.dat", Body=phone, ContentType="image/jpeg",
                      Metadata={"original-format": "JPEG"})
        publish_as_app(s3, world.moto.bucket, uid, [f"{md5_hex(phone[:4096])},{len(phone)},{md5_hex(phone)},1700000000,JPEG"])
        bodies = [write_photo(d.photos / f"IMG_{i}.jpg", 0, images.encode(images.bands(320 + i, 200, vertical=bool(i), size=20), "JPEG"))
                  for i in range(2)]
        d.wait_for(lambda s: settled(2)(s) and s["catalog"]["state"] == "published" and s["catalog"]["rows"] == 2
                   and s["thumbnails"]["pending"] == 0 and not s["watch"]["scanning"] and s["mirror"]["present"] == 1,
                   timeout=120, what="two photos backed up and in the catalog, the phone's mirrored")
        assert sorted(world.objects(uid)) == sorted(world.key(uid, b) for b in bodies + [phone])
        machine.step_out()
        # Each chore's first round after the uploads may learn something (the listing finds the
        # two photos, the manifest logs them): let every one of them run once before watching.
        time.sleep(75)
        d.wait_for(lambda s: settled(2)(s) and s["state"] == "running", what="still idle")
        # Then a whole round of chores without a byte written, by the counter the watch
        # reads (at most five minutes more): a chore's first round can come late (their
        # times are spread ±10 %) and write, and the first read after the last write marks
        # its place in SQLite's -shm mapping, a page dirtied once (a clean-clone CI run saw
        # exactly those 4,096 bytes inside the window, with no write to any file).
        settling = time.monotonic()
        quiet_since, first = settling, write_bytes(d.proc.pid)
        last = first
        while time.monotonic() - quiet_since < 70:
            assert time.monotonic() - settling < 300, \
                f"the daemon kept writing for five minutes after its work was done ({last - first} bytes)"
            time.sleep(5)
            now = write_bytes(d.proc.pid)
            if now != last:
                quiet_since, last = time.monotonic(), now
        apple_before = world.backend.stats()["calls"].get("credential-state", {}).get("count", 0)
        pings_before = len(switch.pings())

        log_before = len(d.log())
        trail = d.state_dir / "audit.log"
        trail_before = trail.stat()
        watch = StateWatch(d.state_dir, d.proc.pid).start()
        time.sleep(WATCH_SECONDS)
        watch.stop()
        # Debug builds name each statement that wrote (PHOTOLALAD_TRACE_WRITES): the culprit.
        statements = [line for line in d.log()[log_before:].splitlines() if "SQL write:" in line]
        report = watch.report() + "".join(f"\n  {line[:160]}" for line in statements[:40])
        print(report)

        trail_after = trail.stat()
        assert (trail_after.st_size, trail_after.st_mtime_ns) == (trail_before.st_size, trail_before.st_mtime_ns), \
            "the audit trail was written while nothing happened"
        assert watch.events == [] and statements == [], f"the state directory was written while idle:\n{report}"
        assert watch.written < 4096, f"write_bytes grew by {watch.written} while idle:\n{report}"
        # The chores ran meanwhile: the quiet is the daemon's, not a stall's.
        ops = world.s3_ops(since=watch.started)
        listings = len([r for r in ops if r["op"] == "ListObjectsV2"])
        assert listings >= 8, f"{listings} listings (photos and thumbnails) in {WATCH_SECONDS} s with a one-minute interval"
        catalog_reads = len([r for r in ops if r["op"] == "GetObject" and "/catalogs/" in r["path"]])
        assert catalog_reads >= 4, f"{catalog_reads} catalog checks in {WATCH_SECONDS} s with a one-minute interval"
        pointer_reads = len([r for r in ops if r["op"] == "GetObject" and r["path"].endswith("/.photolala.md5")])
        assert pointer_reads >= 12, f"{pointer_reads} pointer reads (the catalog's and the mirror's) in {WATCH_SECONDS} s"
        assert not [r for r in ops if r["op"] == "GetObject" and f"/photos/{uid}/" in r["path"]], "nothing copied again"
        apple = world.backend.stats()["calls"].get("credential-state", {}).get("count", 0) - apple_before
        assert apple >= 4, f"{apple} Apple checks in {WATCH_SECONDS} s"
        pings = switch.pings()[pings_before:]
        assert len(pings) >= 4 and all(kind == "ok" for kind, _ in pings), pings
        told = [r for r in hook.received() if r["time"] >= watch.started]
        assert told == [], "nothing happened meanwhile, so nothing was told"
        s = d.status()
        assert settled(2)(s) and s["state"] == "running" and s["queue"]["failed"] == 0
        assert s["mirror"]["state"] == "idle" and s["mirror"]["present"] == 1 and s["mirror"]["lastError"] is None
    finally:
        hook.stop()
        switch.stop()
        for daemon in world.daemons:
            daemon.stop()
        # Back beside the daemon's other files, where the secret check and a reader find it.
        if d is not None and (log_dir / "d.log").exists():
            shutil.copyfile(log_dir / "d.log", d.root / "d.log")
            d.log_path = d.root / "d.log"
        shutil.rmtree(log_dir, ignore_errors=True)
