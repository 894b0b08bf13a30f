"""The reliability table (issue 7): each suite records what it injected, how many times
and what it checked; the test's own outcome is the result. At the end of a session the
rows are merged into docs/reliability.json (keyed by test, so running one suite keeps the
others' last rows) and docs/reliability.md is written from it. Nothing here decides a
result: a row whose test failed says FAIL."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
JSON_PATH = Path(os.environ.get("PHOTOLALA_RELIABILITY_JSON", REPO / "docs" / "reliability.json"))
MD_PATH = JSON_PATH.with_suffix(".md")

# Table order, and the one-line description of each suite.
SUITES = {
    "crash": "kill -9 at random moments of hashing, database writes, PUTs and multipart uploads",
    "storage": "the state directory full, read-only or truncated",
    "network": "S3 and backend faults through a fault-injecting proxy",
    "filesystem": "hostile trees and files changing under the daemon",
    "socket": "abuse of the control socket",
    "secrets": "tokens, keys and the Apple subject kept out of logs and files",
    "soak": "continuous drops, STS expiry and Apple state flips over time",
}


@dataclass
class Row:
    suite: str
    test: str
    injected: str
    times: str
    checked: str
    figures: dict = field(default_factory=dict)
    result: str = "not run"
    seconds: float = 0.0
    variant: str = "short"
    date: str = ""


class Recorder:
    """One test's row. `injected`, `times` and `checked` are plain words for the table;
    `figure(name, value)` adds a measured number to it (re-sent bytes, RSS growth…)."""

    def __init__(self, suite: str, test: str, variant: str):
        assert suite in SUITES, f"unknown suite {suite!r}"
        self.row = Row(suite=suite, test=test, injected="", times="", checked="", variant=variant)

    def describe(self, injected: str, times: str | int, checked: str):
        self.row.injected, self.row.times, self.row.checked = injected, str(times), checked

    def figure(self, name: str, value):
        self.row.figures[name] = value


def load() -> dict[str, dict]:
    try:
        return {r["test"]: r for r in json.loads(JSON_PATH.read_text())["rows"]}
    except (FileNotFoundError, ValueError, KeyError):
        return {}


def merge(rows: list[Row]):
    if not rows:
        return
    known = load()
    for r in rows:
        known[r.test] = asdict(r)
    ordered = sorted(known.values(), key=lambda r: (list(SUITES).index(r["suite"]) if r["suite"] in SUITES else 99, r["test"]))
    JSON_PATH.parent.mkdir(parents=True, exist_ok=True)
    JSON_PATH.write_text(json.dumps({"rows": ordered}, indent=1) + "\n")
    MD_PATH.write_text(render(ordered))


def render(rows: list[dict]) -> str:
    def cell(s) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")

    out = [
        "# Reliability",
        "",
        "Written by the suites themselves (`Tests/e2e/test_reliability_*.py`, through",
        "`Tests/e2e/support/reliability.py`) at the end of each pytest session: one row per",
        "test, its result being the test's own outcome. Run them with",
        "`scripts/test -k reliability` (the short variants, as CI does) or",
        "`scripts/test -k reliability --long` (the long variants). Machine-readable copy:",
        "`docs/reliability.json`.",
        "",
    ]
    for suite, what in SUITES.items():
        mine = [r for r in rows if r["suite"] == suite]
        if not mine:
            continue
        out += [f"## {suite.capitalize()}: {what}", "",
                "| test | injected | how many times | checked | figures | result | run |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in mine:
            figures = ", ".join(f"{k} = {v}" for k, v in r.get("figures", {}).items())
            run = f"{r.get('date', '')}, {r.get('variant', '')}, {r.get('seconds', 0):.0f} s"
            out.append(f"| `{cell(r['test'])}` | {cell(r['injected'])} | {cell(r['times'])} | {cell(r['checked'])} "
                       f"| {cell(figures)} | **{r['result']}** | {run} |")
        out.append("")
    out += [f"Machine of the last run: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}.", ""]
    return "\n".join(out)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
