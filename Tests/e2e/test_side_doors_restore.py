"""No side doors, the reading side (issue 31 items 4 and 5, privacy.md "No side doors"):
someone who can write the account's prefix but holds no key swaps a photo's object.

- Sizes before bytes (item 4): a 50 KB manifest entry whose object is replaced by 40 MB.
  `restore` in place and with `--to` exits 1 naming the file, and nothing of the 40 MB is
  written anywhere (the daemon refuses the object on its head, before relaying a byte:
  an audit record `restore` `refused` says so). `restore --by-date` does not read an
  object whose size is not the apps' catalog's for its MD5 at all.
- A format is for good, the reading side (item 1): a plaintext device.json and a forged
  `.plm` for a device whose sealed segments are in the bucket are refused by `devices` and
  `restore` on another NAS of the account (one sentence naming the device, an audit record
  `manifest.refused`, status attention, a notification), `--allow-unencrypted` or not;
  `--allow-unencrypted` goes only with `--to`.
- Freshness without memory (item 3): a fresh NAS restoring a device whose newest segment
  was deleted and whose older record was put back exits 1 naming the device and the gap,
  because another NAS's sealed record vouches for the newer head; `--as-of` before the gap
  restores whole.
- Export checks the SHA-256 (item 5): an object replaced by other bytes with the same MD5
  (Marc Stevens' single-block collision, a common suffix after it) is refused by `restore
  --by-date` on a NAS whose sealed manifest records the photo's SHA-256; the summary says
  how many photos were checked by MD5 alone.

The command's own bound (it never writes past the manifest's size, whatever a daemon
sends) is RestoreServiceTests' `theCommandNeverWritesPastTheManifestsSizeWhateverTheDaemonSends`."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import time
from pathlib import Path

from support import manifest_reader
from support.app_catalog import fake_body, fake_row, publish_as_app
from support.notify_receivers import Receiver
from support.world import apple_subject, write_photo

MiB = 1 << 20

# Marc Stevens' single-block MD5 collision (2012): two 64-byte blocks, one MD5. A block
# boundary ends each, so any common suffix keeps the MD5s equal.
STEVENS_1 = bytes.fromhex("4dc968ff0ee35c209572d4777b721587d36fa7b21bdc56b74a3dc0783e7b9518"
                          "afbfa200a8284bf36e8e4b55b35f427593d849676da0d1555d8360fb5f07fea2")
STEVENS_2 = bytes.fromhex("4dc968ff0ee35c209572d4777b721587d36fa7b21bdc56b74a3dc0783e7b9518"
                          "afbfa202a8284bf36e8e4b55b35f427593d849676da0d1d55d8360fb5f07fea2")


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def iso_ms(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def manifest_idle(files: int):
    def check(s: dict) -> bool:
        m = s.get("manifest") or {}
        return m.get("state") == "idle" and m.get("files") == files and m.get("format") == 2
    return check


def on_disk(root: Path) -> tuple[dict[str, int], int]:
    """Every file below `root` (a restore's temporary ones included) with its size, and the
    blocks they take on disk together, in bytes."""
    files, used = {}, 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            st = os.lstat(os.path.join(dirpath, n))
            files[os.path.relpath(os.path.join(dirpath, n), root)] = st.st_size
            used += st.st_blocks * 512
    return files, used


def refused_records(d, md5_hex: str) -> list[dict]:
    records = json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]
    return [r for r in records if r["event"] == "restore" and r["outcome"] == "refused" and r["details"].get("md5") == md5_hex]


def object_reads(world, since: float, md5_hex: str) -> list[dict]:
    return [q for q in world.proxy.stats()["requests"] if q["time"] >= since and q["method"] == "GET" and md5_hex in q["path"]]


def a_nas(world, tag: str, files: dict[str, bytes], name: str = "a", sub: str | None = None, config: dict | None = None):
    sub = sub or apple_subject(tag)
    a = world.daemon(name, config=config)
    for rel, body in files.items():
        write_photo(a.photos / rel, len(body), body)
    uid = world.login(a, sub=sub)
    a.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what="the account key made")
    a.wait_for(manifest_idle(len(files)), timeout=90, what="the photos in the sealed manifest")
    return uid, a


def another_nas(world, name: str, sub: str, recovery_key: str, config: dict | None = None):
    """A NAS of the same account that is given the recovery key."""
    d = world.daemon(name, config=config)
    world.login(d, sub=sub)
    d.wait_for(lambda s: s["recovery"]["state"] == "needed", timeout=30, what=f"{name} needs the key")
    r = d.ctl("recovery-key", "--enter", input=recovery_key + "\n")
    assert r.returncode == 0, r.stdout + r.stderr
    d.wait_for(lambda s: s["recovery"]["state"] == "ready", timeout=30, what=f"{name} holds the key")
    return d


def put(world, key: str, body: bytes):
    world.moto.s3_admin().put_object(Bucket=world.moto.bucket, Key=key, Body=body)


def plaintext_segment(device: str, folder: str, path: bytes, data: bytes) -> bytes:
    """A forger's format-1 log segment 1 (docs/manifest.md), one `appeared` record, with
    its SHA-256 recomputed so it checks out."""
    def uvarint(n: int) -> bytes:
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | 0x80 if n else b)
            if not n:
                return bytes(out)
    now = int(time.time() * 1000) - 60_000
    body = uvarint(0) + uvarint(0) + uvarint(len(path)) + path + b"\x01" + uvarint(now << 1) + uvarint(len(data)) \
        + hashlib.md5(data).digest() + uvarint(1_700_000_000 << 1) + uvarint(0)
    header = json.dumps({"format": 1, "kind": "log", "device": device, "seq": 1, "entries": 1, "folders": [folder],
                         "createdAt": "2026-11-22T07:00:00Z"}).encode()
    rest = len(header).to_bytes(4, "big") + header + body
    segment = manifest_reader.MAGIC + hashlib.sha256(rest).digest() + rest
    manifest_reader.decode_segment(segment)
    return segment


def test_an_object_swapped_for_40_mb_is_refused_before_a_byte_is_written(world, tmp_path):
    small, big = os.urandom(20_000), os.urandom(50_000)
    uid, a = a_nas(world, "oversize", {"keep/small.jpg": small, "keep/big.jpg": big})
    device = a.status()["manifest"]["deviceId"]
    time.sleep(1.1)
    before_delete = time.time()
    time.sleep(1.1)
    # The file leaves the NAS; its manifest entry stays in the history (--as-of brings it back).
    os.unlink(a.photos / "keep" / "big.jpg")
    a.wait_for(manifest_idle(1), timeout=90, what="the deletion in the manifest")
    # The attack: the 50 KB photo's object becomes 40 MB.
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{md5(big)}.dat", Body=os.urandom(40 * MiB))

    # In place, as root: into the watched folder the file came from.
    r = a.ctl("restore", "--device", device, "--as-of", iso_ms(before_delete), timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if "big.jpg" in line and "failed" in line]
    assert len(lines) == 1 and f"holds {40 * MiB} bytes in the bucket, not the 50000 expected" in lines[0], r.stdout
    files, used = on_disk(a.photos)
    assert files == {"keep/small.jpg": 20_000}, files
    assert used <= 64 << 10, used
    assert len(refused_records(a, md5(big))) == 1

    # Under --to: the other file restored, nothing of the swapped one.
    to = tmp_path / "to"
    r = a.ctl("restore", "--device", device, "--as-of", iso_ms(before_delete), "--to", str(to), "--json", timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    assert summary["restored"] == 1 and summary["failed"] == 1, summary
    [problem] = summary["problems"]
    assert problem["path"].endswith("keep/big.jpg") and "not the 50000 expected" in problem["message"], problem
    files, used = on_disk(to)
    assert list(files.values()) == [20_000] and next(iter(files)).endswith("keep/small.jpg"), files
    assert used <= 64 << 10, used
    recs = refused_records(a, md5(big))
    assert len(recs) == 2 and recs[-1]["details"]["size"] == 40 * MiB and recs[-1]["details"]["expected"] == 50_000, recs


def test_export_does_not_read_an_object_whose_size_is_not_the_catalogs(world, tmp_path):
    sub = apple_subject("oversize-export")
    a = world.daemon("a")
    uid = world.login(a, sub=sub)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    good = fake_row("good", 1_650_000_000, "JPEG", size=30_000)
    bad = fake_row("bad", 1_650_086_400, "JPEG", size=50_000)
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{good.md5}.dat", Body=fake_body(good.seed, good.size), ContentType="image/jpeg")
    # The attack: the 50 KB photo's object (the catalog's row still says 50,000) becomes 40 MB.
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{bad.md5}.dat", Body=os.urandom(40 * MiB), ContentType="image/jpeg")
    publish_as_app(s3, bucket, uid, [good.line, bad.line])

    out = tmp_path / "export"
    since = time.time()
    r = a.ctl("restore", "--by-date", "--to", str(out), "--json", timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    assert summary["restored"] == 1 and summary["skipped"] == 1, summary
    [problem] = summary["problems"]
    assert bad.md5 in problem["message"] and f"holds {40 * MiB} bytes in the bucket, but the apps' catalog says" in problem["message"], problem
    files, used = on_disk(out)
    assert list(files.values()) == [30_000], files
    assert used <= 64 << 10, used
    # Not read at all: not a byte of it came from the bucket.
    assert object_reads(world, since, bad.md5) == []


def test_export_checks_the_sha256_a_manifest_records(world, tmp_path):
    suffix = os.urandom(20_000)
    genuine, forged = STEVENS_1 + suffix, STEVENS_2 + suffix
    assert genuine != forged and md5(genuine) == md5(forged)
    plain = os.urandom(25_000)
    uid, a = a_nas(world, "collision", {"2024/collide.jpg": genuine, "2024/plain.jpg": plain})
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    # A photo no manifest of the account records (a phone's): checked by its MD5 alone.
    phone = fake_row("phone", 1_650_000_000, "JPEG", size=3_000)
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{phone.md5}.dat", Body=fake_body(phone.seed, phone.size), ContentType="image/jpeg")
    # The attack: other bytes with the same MD5.
    s3.put_object(Bucket=bucket, Key=f"photos/{uid}/{md5(genuine)}.dat", Body=forged)

    out = tmp_path / "export"
    r = a.ctl("restore", "--by-date", "--to", str(out), timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    failed = [line for line in r.stdout.splitlines() if md5(genuine)[:8] in line and "failed" in line]
    assert len(failed) == 1 and "not the SHA-256 the manifest recorded" in failed[0], r.stdout
    assert "1 photo was checked by MD5 alone (no manifest this NAS can open records its SHA-256), 2 by SHA-256 as well." in r.stdout, r.stdout
    assert "Exported 2 files of 3" in r.stdout, r.stdout
    written = {p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert written == {plain, fake_body(phone.seed, phone.size)}, [len(b) for b in written]

    # Again, as a script reads it: the same refusal, the counts in the JSON.
    r = a.ctl("restore", "--by-date", "--to", str(out), "--json", timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    summary = json.loads(r.stdout)
    assert summary["alreadyThere"] == 2 and summary["failed"] == 1, summary
    assert summary["checkedBySHA256"] == 2 and summary["checkedByMD5Alone"] == 1, summary
    [problem] = summary["problems"]
    assert md5(genuine)[:8] in problem["path"] and "SHA-256" in problem["message"], problem
    assert {p.read_bytes() for p in out.rglob("*") if p.is_file()} == written


def test_a_downgraded_device_is_refused_by_devices_and_restore_on_another_nas(world, tmp_path):
    hook = Receiver("json").start()
    try:
        sub = apple_subject("downgrade-restore")
        uid, a = a_nas(world, "", {"one.jpg": os.urandom(20_000)}, sub=sub)
        device = a.status()["manifest"]["deviceId"]
        key = json.loads(a.ctl("recovery-key", "--json", check=True).stdout)["recoveryKey"]
        b = another_nas(world, "b", sub, key, config={"notify": {"webhook": hook.url("/b")}})
        # The attack of issue 31 item 1, against the NAS that restores: a plaintext record
        # under the attacker's name and a forged segment putting their key into b's
        # watched folder, while a's sealed segments are still in the bucket.
        marker = "PWNED-" + os.urandom(4).hex()
        evil = f"ssh-ed25519 AAAA {marker}\n".encode()
        prefix = manifest_reader.device_prefix(uid, device)
        put(world, prefix + "device.json", json.dumps({
            "format": 1, "deviceId": device, "name": marker, "folders": [str(b.photos)], "lastBackupAt": "2026-11-22T07:00:00Z",
            "files": 1, "bytes": len(evil), "logSeq": 1, "snapshotSeq": 0, "updatedAt": "2026-11-22T07:00:00Z",
            "software": "forger"}).encode())
        put(world, prefix + "log/000000000001.plm", plaintext_segment(device, str(b.photos), b".ssh/authorized_keys", evil))
        put(world, f"photos/{uid}/{md5(evil)}.dat", evil)

        r = b.ctl("devices", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        [row] = [d for d in json.loads(r.stdout)["devices"] if d["id"] == device]
        assert row["access"] == "unreadable" and row["name"] is None and marker not in r.stdout, row
        assert f"the manifest of device {device} was downgraded in the bucket" in row["problem"], row

        to = tmp_path / "to"
        r = b.ctl("restore", "--device", device, "--allow-unencrypted", "--to", str(to), timeout=90)
        assert r.returncode == 1, r.stdout + r.stderr
        [sentence] = [line for line in r.stderr.splitlines() if line.strip()]
        assert f"the manifest of device {device} was downgraded in the bucket" in sentence and "sealed segments" in sentence, r.stderr
        assert not to.exists() or list(to.rglob("*")) == []
        # In place it is not even asked: --allow-unencrypted goes with --to only.
        r = b.ctl("restore", "--device", device, "--allow-unencrypted", timeout=90)
        assert r.returncode == 64 and "--allow-unencrypted needs --to DIR" in r.stderr, r.stdout + r.stderr
        assert not (b.photos / ".ssh").exists() and not (a.photos / ".ssh").exists()

        status = b.wait_for(lambda s: any(x["device"] == device and x["kind"] == "downgrade" for x in s["manifestAlarms"]),
                            timeout=30, what="the downgrade in b's status")
        assert [x["subject"] for x in status["attention"] if x["reason"] == "manifestDowngrade"] == [device]
        records = json.loads(b.ctl("audit", "--json", check=True).stdout)["records"]
        refused = [x for x in records if x["event"] == "manifest.refused" and x["details"]["device"] == device]
        assert len(refused) == 1 and refused[0]["details"]["why"] == "downgrade", refused
        deadline = time.monotonic() + 60
        while not any(e.get("reason") == "manifestDowngrade" for e in hook.events()):
            assert time.monotonic() < deadline, hook.events()
            time.sleep(0.2)
        assert all(marker not in json.dumps(e) for e in hook.events())
    finally:
        hook.stop()


def test_a_fresh_nas_finds_a_cut_log_another_nas_vouches_for(world, tmp_path):
    sub = apple_subject("cut-log")
    first = os.urandom(20_000)
    uid, a = a_nas(world, "", {"first.jpg": first}, sub=sub)
    device = a.status()["manifest"]["deviceId"]
    key = json.loads(a.ctl("recovery-key", "--json", check=True).stdout)["recoveryKey"]
    prefix = manifest_reader.device_prefix(uid, device)
    s3, bucket = world.moto.s3_admin(), world.moto.bucket
    time.sleep(1.1)
    between = time.time()
    time.sleep(1.1)
    write_photo(a.photos / "second.jpg", 20_000)
    a.wait_for(manifest_idle(2), timeout=90, what="segment 2")
    old_record = s3.get_object(Bucket=bucket, Key=prefix + "device.json")["Body"].read()
    write_photo(a.photos / "third.jpg", 20_000)
    a.wait_for(manifest_idle(3), timeout=90, what="segment 3")
    assert s3.head_object(Bucket=bucket, Key=prefix + "log/000000000003.pls")
    # Another NAS of the account writes its record, which vouches for a's segment 3.
    c = another_nas(world, "c", sub, key)
    write_photo(c.photos / "c.jpg", 10_000)
    c.wait_for(manifest_idle(1), timeout=90, what="c's record")

    # The attack: the newest segment deleted, the older record put back (a new PUT of it).
    s3.delete_object(Bucket=bucket, Key=prefix + "log/000000000003.pls")
    s3.put_object(Bucket=bucket, Key=prefix + "device.json", Body=old_record)

    d = another_nas(world, "d", sub, key)
    to = tmp_path / "to"
    r = d.ctl("restore", "--device", device, "--to", str(to), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    gap = [line for line in r.stdout.splitlines() if f"saw the manifest of device {device} up to segment 3" in line]
    assert len(gap) == 1 and "the bucket holds it up to segment 2" in gap[0], r.stdout
    assert any(x["device"] == device and x["kind"] == "rollback" for x in d.status()["manifestAlarms"])
    records = json.loads(d.ctl("audit", "--json", check=True).stdout)["records"]
    assert any(x["event"] == "manifest.refused" and x["details"]["device"] == device and x["details"]["why"] == "rollback" for x in records)
    # As of a time before the gap (before the newest change the bucket still holds), the
    # restore is whole.
    r = d.ctl("restore", "--device", device, "--to", str(tmp_path / "before"), "--as-of", iso_ms(between), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [p.read_bytes() for p in (tmp_path / "before").rglob("*") if p.is_file()] == [first]
