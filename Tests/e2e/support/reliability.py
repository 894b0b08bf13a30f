"""The reliability table (issue 7): each suite records what it injected, how many times
and what it checked; the test's own outcome is the result. Each row travels with its
test's teardown report (so the rows of every xdist worker reach the controlling
process), and at the end of the session the controller merges them into
reliability.json in the run's output directory (keyed by test, so a second run into the
same directory keeps the others' rows) and writes reliability.md from it. A test run
never writes into the checkout: docs/reliability.md and .json are a reviewed copy of a
run's report, updated by hand. Nothing here decides a result: a row whose test failed
says FAIL."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .run import output_dir

# The name a row has among a report's user_properties.
PROPERTY = "reliability_row"


def json_path() -> Path:
    """reliability.json in the run's output directory (PHOTOLALA_RELIABILITY_JSON: elsewhere)."""
    given = os.environ.get("PHOTOLALA_RELIABILITY_JSON")
    return Path(given) if given else output_dir() / "reliability.json"

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


def load(path: Path) -> dict[str, dict]:
    try:
        return {r["test"]: r for r in json.loads(path.read_text())["rows"]}
    except (FileNotFoundError, ValueError, KeyError):
        return {}


def merge(rows: list[dict]) -> Path | None:
    """Merges finished rows (as `asdict(Row)`) into the report; returns its .md path."""
    if not rows:
        return None
    path = json_path()
    known = load(path)
    for r in rows:
        known[r["test"]] = r
    ordered = sorted(known.values(), key=lambda r: (list(SUITES).index(r["suite"]) if r["suite"] in SUITES else 99, r["test"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": ordered}, indent=1) + "\n")
    md = path.with_suffix(".md")
    md.write_text(render(ordered))
    return md


def render(rows: list[dict]) -> str:
    def cell(s) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")

    out = [
        "# Reliability",
        "",
        "Written by the suites themselves (`Tests/e2e/test_reliability_*.py`, through",
        "`Tests/e2e/support/reliability.py`) at the end of each pytest session, into the",
        "run's output directory: one row per test, its result being the test's own outcome.",
        "Run them with `scripts/test -k reliability` (the short variants, as CI does) or",
        "`scripts/test -k reliability --long` (the long variants). Machine-readable copy:",
        "`reliability.json` beside this file. `docs/reliability.md` is a reviewed copy.",
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
