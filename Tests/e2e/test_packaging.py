"""The Debian package, checked from the outside: scripts/build-deb builds it from the
files a clean clone has (once per session, shared with test_systemd_nspawn.py), then
lintian, the exact contents, the control fields, the maintainer scripts, the unit
(systemd-analyze verify and a security exposure of at most 2.0), the man pages and
the completions. Select with `-m packaging`; it runs by default."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.nspawn import REPO, built_deb

pytestmark = pytest.mark.packaging

UNIT = REPO / "packaging" / "photolalad.service"
TEMPLATE = REPO / "packaging" / "photolalad@.service"
GROUP_UNIT = REPO / "packaging" / "photolalad-group@.service"
MAX_EXPOSURE = 2.0

# Every path in the package; "->" marks a symbolic link and its target.
EXPECTED_CONTENTS = {
    "./",
    "./etc/",
    "./etc/photolala/",
    "./etc/photolala/photolalad.toml",
    "./lib/",
    "./lib/systemd/",
    "./lib/systemd/system/",
    "./lib/systemd/system/photolalad-group@.service",
    "./lib/systemd/system/photolalad.service",
    "./lib/systemd/system/photolalad@.service",
    "./usr/",
    "./usr/bin/",
    "./usr/bin/photolalad",
    "./usr/bin/photolalactl -> photolalad",
    "./usr/lib/",
    "./usr/lib/sysusers.d/",
    "./usr/lib/sysusers.d/photolalad.conf",
    "./usr/share/",
    "./usr/share/bash-completion/",
    "./usr/share/bash-completion/completions/",
    "./usr/share/bash-completion/completions/photolalactl",
    "./usr/share/doc/",
    "./usr/share/doc/photolalad/",
    "./usr/share/doc/photolalad/README.Debian",
    "./usr/share/doc/photolalad/changelog.gz",
    "./usr/share/doc/photolalad/copyright",
    "./usr/share/fish/",
    "./usr/share/fish/vendor_completions.d/",
    "./usr/share/fish/vendor_completions.d/photolalactl.fish",
    "./usr/share/lintian/",
    "./usr/share/lintian/overrides/",
    "./usr/share/lintian/overrides/photolalad",
    "./usr/share/man/",
    "./usr/share/man/man1/",
    "./usr/share/man/man1/photolalactl.1.gz",
    "./usr/share/man/man5/",
    "./usr/share/man/man5/photolalad.toml.5.gz",
    "./usr/share/man/man8/",
    "./usr/share/man/man8/photolalad.8.gz",
    "./usr/share/photolalad/",
    "./usr/share/photolalad/grafana/",
    "./usr/share/photolalad/grafana/photolalad-dashboard.json",
    "./usr/share/photolalad/prometheus/",
    "./usr/share/photolalad/prometheus/photolalad.rules.yml",
    "./usr/share/zsh/",
    "./usr/share/zsh/vendor-completions/",
    "./usr/share/zsh/vendor-completions/_photolalactl",
}


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def deb():
    return built_deb()


@pytest.fixture(scope="module")
def extracted(deb, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("deb-root")
    subprocess.run(["dpkg-deb", "-x", str(deb.path), str(root)], check=True)
    return root


@pytest.fixture(scope="module")
def control(deb) -> dict[str, str]:
    out = run(["dpkg-deb", "-f", str(deb.path)], check=True).stdout
    fields, key = {}, None
    for line in out.splitlines():
        if line[:1].isspace() and key:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields


# -- the build ---------------------------------------------------------------


def test_build_gives_a_deb_and_its_dbgsym(deb):
    assert deb.path.name.startswith("photolalad_0.1.0_") and deb.path.suffix == ".deb"
    assert deb.dbgsym is not None and deb.dbgsym.is_file(), "no photolalad-dbgsym package was built"
    size_mb = deb.path.stat().st_size / 2**20
    print(f"\n.deb: {deb.path} {size_mb:.1f} MiB, dbgsym {deb.dbgsym.stat().st_size / 2**20:.1f} MiB, "
          f"built in {deb.seconds:.0f}s")
    assert 1 < size_mb < 60, f"{size_mb:.1f} MiB is not a plausible size"
    info = run(["dpkg-deb", "-f", str(deb.dbgsym), "Package", "Depends"], check=True).stdout
    assert "Package: photolalad-dbgsym" in info and "photolalad (= 0.1.0)" in info
    contents = run(["dpkg-deb", "-c", str(deb.dbgsym)], check=True).stdout
    assert re.search(r"\./usr/lib/debug/\.build-id/../[0-9a-f]+\.debug", contents), contents


def test_control_fields(control):
    assert control["Package"] == "photolalad"
    assert control["Version"] == "0.1.0"
    assert control["Maintainer"]
    assert control["Description"].startswith("Photolala backup agent")
    depends = control["Depends"]
    # The C libraries come from ${shlibs:Depends}; the Swift runtime is linked in.
    for lib in ("libc6", "libsystemd0", "libssl3", "libsqlite3-0", "zlib1g"):
        assert re.search(rf"\b{re.escape(lib)}\b", depends), f"{lib} missing from Depends: {depends}"
    assert "swift" not in depends.lower() and "foundation" not in depends.lower(), depends
    # The preview worker's decoders, named by hand in debian/control: it loads them with
    # dlopen, so dpkg-shlibdeps cannot see them. Its sandbox (libseccomp2) is linked.
    for lib in ("libvips42", "libraw20", "libseccomp2"):
        assert re.search(rf"\b{re.escape(lib)}\b", depends), f"{lib} missing from Depends: {depends}"
    # One .deb for Debian 12 and 13: Debian 13's decoders first, Debian 12's as the alternative.
    assert "libraw23t64 | libraw20" in depends and "libvips42t64 (>= 8.13) | libvips42 (>= 8.13)" in depends, depends
    # dh_installsysusers: systemd-sysusers must be there to create the user.
    assert "systemd" in depends, depends


def test_binary_links_no_swift_runtime(extracted):
    binary = extracted / "usr/bin/photolalad"
    dyn = run(["objdump", "-p", str(binary)], check=True).stdout
    needed = re.findall(r"NEEDED\s+(\S+)", dyn)
    assert needed, dyn
    assert not [n for n in needed if re.match(r"lib(swift|Foundation|_Foundation|dispatch|BlocksRuntime)", n)], needed
    assert "RPATH" not in dyn and "RUNPATH" not in dyn
    # Stripped: the symbols are in the -dbgsym package.
    sections = run(["objdump", "-h", str(binary)], check=True).stdout
    assert ".debug_info" not in sections
    version = run([str(binary), "--version"], check=True).stdout.strip()
    assert version == "0.1.0"


def test_binary_links_no_image_decoder(extracted):
    """Only the preview worker loads the decoders: the daemon, which holds the
    credentials, never maps them (nor the ~90 libraries they bring)."""
    needed = re.findall(r"NEEDED\s+(\S+)", run(["objdump", "-p", str(extracted / "usr/bin/photolalad")], check=True).stdout)
    assert not [n for n in needed if re.match(r"lib(vips|raw|heif|glib|gobject|gio|tiff|png|jpeg|webp)", n)], needed


def test_contents_are_exactly_the_expected_files(deb):
    listing = run(["dpkg-deb", "-c", str(deb.path)], check=True).stdout
    entries, modes = set(), {}
    for line in listing.splitlines():
        perms, owner, _size, _date, _time, rest = line.split(None, 5)
        entries.add(rest)
        modes[rest.split(" -> ")[0]] = (perms, owner)
    assert entries == EXPECTED_CONTENTS, (
        f"unexpected: {sorted(entries - EXPECTED_CONTENTS)}\nmissing: {sorted(EXPECTED_CONTENTS - entries)}")
    assert modes["./usr/bin/photolalad"] == ("-rwxr-xr-x", "root/root")
    assert modes["./etc/photolala/photolalad.toml"] == ("-rw-r--r--", "root/root")
    assert modes["./lib/systemd/system/photolalad.service"] == ("-rw-r--r--", "root/root")
    conffiles = run(["dpkg-deb", "-I", str(deb.path), "conffiles"], check=True).stdout.split()
    assert conffiles == ["/etc/photolala/photolalad.toml"]


def test_shipped_config_is_commented_and_valid_once_a_folder_is_set(extracted, tmp_path):
    binary = str(extracted / "usr/bin/photolalad")
    shipped = (extracted / "etc/photolala/photolalad.toml").read_text()
    assert shipped == (REPO / "etc/photolala/photolalad.toml").read_text()
    assert sum(1 for l in shipped.splitlines() if l.startswith("#")) > 20
    as_shipped = run([binary, "--check-config", "--config", str(extracted / "etc/photolala/photolalad.toml")])
    assert as_shipped.returncode == 78 and "watch.folders" in as_shipped.stderr
    configured = tmp_path / "photolalad.toml"
    configured.write_text(shipped.replace("folders = []", 'folders = ["/srv/photos"]'))
    ok = run([binary, "--check-config", "--config", str(configured)])
    assert ok.returncode == 0, ok.stderr


def test_unit_in_the_package_is_the_one_in_packaging(extracted):
    assert (extracted / "lib/systemd/system/photolalad.service").read_text() == UNIT.read_text()
    assert (extracted / "lib/systemd/system/photolalad@.service").read_text() == TEMPLATE.read_text()
    assert (extracted / "lib/systemd/system/photolalad-group@.service").read_text() == GROUP_UNIT.read_text()
    sysusers = (extracted / "usr/lib/sysusers.d/photolalad.conf").read_text()
    assert re.search(r"^u photolala - .* /var/lib/photolala /usr/sbin/nologin$", sysusers, re.M), sysusers


def test_prometheus_rules_and_grafana_dashboard_are_the_ones_in_packaging(extracted):
    rules = extracted / "usr/share/photolalad/prometheus/photolalad.rules.yml"
    assert rules.read_bytes() == (REPO / "packaging/prometheus/photolalad.rules.yml").read_bytes()
    dashboard = extracted / "usr/share/photolalad/grafana/photolalad-dashboard.json"
    assert dashboard.read_bytes() == (REPO / "packaging/prometheus/photolalad-dashboard.json").read_bytes()
    if shutil.which("promtool"):
        check = run(["promtool", "check", "rules", str(rules)])
        assert check.returncode == 0, check.stdout + check.stderr


def test_completions_are_for_photolalactl(extracted):
    bash = (extracted / "usr/share/bash-completion/completions/photolalactl").read_text()
    assert re.search(r"^complete .*photolalactl$", bash, re.M), bash[-500:]
    zsh = (extracted / "usr/share/zsh/vendor-completions/_photolalactl").read_text()
    assert zsh.startswith("#compdef photolalactl")
    fish = (extracted / "usr/share/fish/vendor_completions.d/photolalactl.fish").read_text()
    assert "complete -c 'photolalactl'" in fish
    for text in (bash, zsh, fish):
        for command in ("status", "login", "logout", "pause", "resume", "rescan", "queue", "retry"):
            assert command in text


def test_maintainer_scripts(deb, tmp_path):
    subprocess.run(["dpkg-deb", "-e", str(deb.path), str(tmp_path)], check=True)
    for name in ("postinst", "prerm", "postrm"):
        script = tmp_path / name
        assert script.is_file(), name
        assert run(["sh", "-n", str(script)]).returncode == 0
    postinst = (tmp_path / "postinst").read_text()
    assert "systemd-sysusers" in postinst and "photolalad.conf" in postinst
    assert "deb-systemd-helper enable" in postinst
    # Started (or restarted on upgrade) only when the config is valid.
    start = postinst.index("photolalad --check-config")
    assert "deb-systemd-invoke restart photolalad.service" in postinst[start:]
    assert "deb-systemd-invoke start" not in postinst
    assert "rm -rf" in (tmp_path / "postrm").read_text() and "/var/lib/photolala" in (tmp_path / "postrm").read_text()
    assert '"$1" = "remove"' in (tmp_path / "prerm").read_text()


# -- lintian -----------------------------------------------------------------


def test_lintian_has_no_errors_and_no_unexplained_warnings(deb):
    if not shutil.which("lintian"):
        pytest.fail("lintian is not installed (scripts/setup installs it)")
    files = [str(deb.path)] + ([str(deb.dbgsym)] if deb.dbgsym else [])
    proc = run(["lintian", "--tag-display-limit", "0", "--display-level", ">=info", *files], timeout=900)
    tags = [l for l in proc.stdout.splitlines()
            if re.match(r"^[EW]: ", l) or re.search(r"\b(unused|mismatched)-override\b", l)]
    print("\nlintian:", proc.stdout.strip() or "clean", sep="\n")
    assert not tags, "lintian (fix it, or override it with a one-line reason):\n" + "\n".join(tags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Each override has its reason on the comment line just above it.
    overrides = (REPO / "debian" / "photolalad.lintian-overrides")
    if overrides.exists():
        lines = overrides.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() and not line.startswith("#"):
                assert i > 0 and lines[i - 1].startswith("# ") and len(lines[i - 1]) > 20, \
                    f"lintian override without a reason: {line}"


# -- the unit ----------------------------------------------------------------


def test_systemd_analyze_verify_is_clean(extracted, tmp_path):
    # The packaged unit, with ExecStart= pointing at the packaged binary and man(1)
    # looking in the packaged man pages, so that every check of verify applies.
    text = (extracted / "lib/systemd/system/photolalad.service").read_text()
    unit = tmp_path / "photolalad.service"
    unit.write_text(text.replace("/usr/bin/photolalad", str(extracted / "usr/bin/photolalad")))
    proc = run(["systemd-analyze", "verify", "--man=yes", str(unit)], timeout=120,
               env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "MANPATH": str(extracted / "usr/share/man"),
                    "LC_ALL": "C.UTF-8"})
    assert proc.returncode == 0 and not proc.stderr.strip() and not proc.stdout.strip(), proc.stdout + proc.stderr
    docs = re.findall(r"man:([\w.]+)\((\d)\)", text)
    assert len(docs) == 3
    for page, section in docs:
        assert (extracted / f"usr/share/man/man{section}/{page}.{section}.gz").is_file(), page


@pytest.mark.parametrize("unit", ["photolalad.service", "photolalad@.service"])
def test_security_exposure_is_at_most_2(deb, unit, tmp_path):
    # The template as one of its instances (systemd-analyze wants a unit it could start).
    path = UNIT if unit == "photolalad.service" else tmp_path / "photolalad@alice.service"
    if path != UNIT:
        path.write_text(TEMPLATE.read_text())
    proc = run(["systemd-analyze", "security", "--offline=true", f"--threshold={int(MAX_EXPOSURE * 10)}",
                "--no-pager", str(path)], cwd=REPO, timeout=120)
    m = re.search(rf"Overall exposure level for {re.escape(path.name)}: (\d+\.\d+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    exposure = float(m.group(1))
    print(f"\nsystemd-analyze security exposure of {path.name}: {exposure}")
    assert exposure <= MAX_EXPOSURE, proc.stdout
    assert proc.returncode == 0, proc.stderr


def unit_settings(unit: Path = UNIT) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, v = line.split("=", 1)
            settings.setdefault(k.strip(), []).append(v.strip())
    return settings


@pytest.mark.parametrize("unit", [UNIT, TEMPLATE], ids=["photolalad.service", "photolalad@.service"])
def test_unit_has_the_required_settings(unit):
    s = unit_settings(unit)
    one = {k: v[-1] for k, v in s.items()}
    assert one["Type"] == "notify"
    assert one["Restart"] == "on-failure"
    assert one["RestartPreventExitStatus"] == "78"
    assert "WatchdogSec" in one and "LimitCORE" in one and one["LimitCORE"] == "0"
    assert any("kill -HUP $MAINPID" in v for v in s["ExecReload"])
    assert one["User"] == "photolala"
    assert one["StateDirectory"] == ("photolala" if unit == UNIT else "photolala/%i") and one["StateDirectoryMode"] == "0700"
    # /run/photolala holds every instance's socket: kept when one stops, passable but not listable.
    assert one["RuntimeDirectory"] == "photolala" and one["RuntimeDirectoryMode"] == "0711"
    assert one["RuntimeDirectoryPreserve"] == "yes"
    assert one["ConfigurationDirectory"] == "photolala"
    assert one["UMask"] == "0077"
    assert one["CapabilityBoundingSet"] == ""
    assert one["RestrictAddressFamilies"] == "AF_UNIX AF_INET AF_INET6"
    assert one["ProtectSystem"] == "strict" and one["ProtectHome"] == "read-only"
    assert s["SystemCallFilter"][0] == "@system-service"
    # ~@privileged takes chown too; the socket's group (socket_group, photolala-NAME) needs it back.
    assert s["SystemCallFilter"].index("@chown") > s["SystemCallFilter"].index("~@privileged")
    for key in ("PrivateTmp", "PrivateDevices", "NoNewPrivileges", "ProtectKernelTunables",
                "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock",
                "ProtectHostname", "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID",
                "LockPersonality", "MemoryDenyWriteExecute"):
        assert one.get(key) == "yes", key
    assert one["SystemCallArchitectures"] == "native"
    assert s["Documentation"]
    if unit == TEMPLATE:
        # Everything of photolalad.service but what makes an instance its own.
        assert one["ExecStart"] == "/usr/bin/photolalad --instance %i"
        assert one["SupplementaryGroups"] == "photolala-%i"
        # The group is made by a unit of its own that runs first: systemd resolves
        # SupplementaryGroups= before any command of this unit, even a "+" ExecStartPre=.
        assert "ExecStartPre" not in s
        assert s["Requires"] == ["photolalad-group@%i.service"] and "photolalad-group@%i.service" in s["After"]
        group = unit_settings(GROUP_UNIT)
        assert group["Type"] == ["oneshot"] and group["RemainAfterExit"] == ["yes"]
        assert group["ExecStart"] == ['/bin/systemd-sysusers --inline "g photolala-%i -"']
        assert "Install" not in GROUP_UNIT.read_text(), "pulled in by the instance, never enabled"
        differs = {k for k in set(s) | set(unit_settings(UNIT)) if s.get(k) != unit_settings(UNIT).get(k)}
        assert differs == {"Description", "ExecStart", "Requires", "After", "ExecReload", "SupplementaryGroups",
                           "StateDirectory"}, differs


# -- the man pages -----------------------------------------------------------

MAN = REPO / "packaging" / "man"
SPEC = REPO.parent / "shared" / "spec"


def test_man_pages_render_without_warnings():
    for page in ("photolalad.8", "photolalactl.1", "photolalad.toml.5"):
        proc = run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", str(MAN / page)],
                   env={"LC_ALL": "C.UTF-8", "MANWIDTH": "80", "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0 and not proc.stderr.strip(), f"{page}: {proc.stderr}"


def man_text(page: str) -> str:
    proc = run(["man", "-l", str(MAN / page)], env={"LC_ALL": "C.UTF-8", "MANWIDTH": "200",
                                                     "PATH": "/usr/bin:/bin", "MAN_KEEP_FORMATTING": ""})
    return re.sub(r".\x08", "", proc.stdout)


def config_keys() -> list[tuple[str, str]]:
    """(section, key) for every key of the example in config.md (or, without shared/, of
    the shipped config)."""
    source = SPEC / "config.md"
    text = source.read_text() if source.exists() else (REPO / "etc/photolala/photolalad.toml").read_text()
    keys, section = [], None
    for line in text.splitlines():
        if m := re.match(r"^\[(\w+)\]", line):
            section = m.group(1)
        elif section and (m := re.match(r"^#?(\w+) = ", line)):
            keys.append((section, m.group(1)))
    return keys


def test_config_man_page_documents_every_key():
    keys = config_keys()
    assert len(keys) >= 19, keys
    text = man_text("photolalad.toml.5")
    for section, key in keys:
        block = text.split(f"[{section}]", 1)[1] if f"[{section}]" in text else ""
        assert re.search(rf"^\s+{key} \(", block, re.M), f"{section}.{key} is not documented in photolalad.toml(5)"


def test_ctl_man_page_documents_every_command_and_exit_code():
    text = man_text("photolalactl.1")
    for command in ("status", "login", "logout", "pause", "resume", "rescan", "queue", "retry"):
        assert re.search(rf"^\s+{command}\b", text, re.M), command
    for option in ("--json", "--failed", "--limit", "--identity-token", "--authorization-code",
                   "--socket", "--config", "--version"):
        assert option in text, option
    exits = text.split("EXIT STATUS", 1)[1].split("ENVIRONMENT", 1)[0]
    for code in ("0", "1", "3", "4"):
        assert re.search(rf"^\s+{code}(\s{{2,}}|\s*$)", exits, re.M), code
    for value in ("needsLogin", "subscriptionRequired", "quotaExceeded", "accountRevoked", "transferred",
                  "backoff", "missingFolders", "lastError"):
        assert value in text, value


def test_daemon_man_page_documents_exit_codes_signals_files_and_share_permissions():
    text = man_text("photolalad.8")
    exits = text.split("EXIT STATUS", 1)[1].split("SIGNALS", 1)[0]
    for code in ("0", "78", "1"):
        assert re.search(rf"^\s+{code}(\s{{2,}}|\s*$)", exits, re.M), code
    for word in ("SIGTERM", "SIGHUP", "READY=1", "STATUS=", "WATCHDOG=1", "RELOADING=1", "STOPPING=1",
                 "/var/lib/photolala", "/run/photolala/photolalad.sock", "/etc/photolala/photolalad.toml",
                 "PHOTOLALA_CONFIG", "usermod -aG", "setfacl -R -m u:photolala:rX", "d:u:photolala:rX",
                 "journalctl -u photolalad"):
        assert word in text, word
