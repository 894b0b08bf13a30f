"""Fixtures for the real test stack: moto (S3/STS/IAM with auth on), the fake Photolala
backend and the fault proxy. All lazy: suites that do not ask for them start nothing."""
import time

import pytest

from support import reliability as rel
from support.fake_backend import FakeBackend
from support.fault_proxy import FaultProxy
from support.stack import MotoServer


@pytest.fixture(scope="session")
def moto():
    """One moto_server for the whole session (setup costs about a second)."""
    server = MotoServer().start()
    yield server
    server.stop()


@pytest.fixture
def backend(moto):
    """A fresh fake backend per test, against the shared moto, with an empty bucket."""
    moto.empty_bucket()
    b = FakeBackend(moto).start()
    yield b
    b.stop()


@pytest.fixture
def proxy(moto):
    """A fresh fault proxy in front of moto, no faults."""
    p = FaultProxy(moto.endpoint).start()
    yield p
    p.stop()


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run the long variants of the reliability suites (soak 30 min, more kills, bigger trees)")


def pytest_configure(config):
    config.addinivalue_line("markers", "packaging: builds the .deb or boots it under a real systemd (runs by default)")
    config.addinivalue_line("markers", "reliability(suite): a reliability suite of issue 7; writes its row to docs/reliability.md")
    config._reliability_rows = []


@pytest.fixture
def long_run(request) -> bool:
    """True under --long: suites scale their counts and durations up."""
    return request.config.getoption("--long")


@pytest.fixture
def reliability(request):
    """The test's row in docs/reliability.md; its result is the test's outcome."""
    marker = request.node.get_closest_marker("reliability")
    assert marker, "a test using the reliability fixture needs @pytest.mark.reliability(suite)"
    variant = "long" if request.config.getoption("--long") else "short"
    recorder = rel.Recorder(marker.args[0], request.node.name, variant)
    request.node._reliability_row = recorder.row
    request.config._reliability_rows.append(recorder.row)
    started = time.monotonic()
    yield recorder
    recorder.row.seconds = time.monotonic() - started
    recorder.row.date = rel.now()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    row = getattr(item, "_reliability_row", None)
    if row is not None and report.when in ("call", "teardown"):
        if report.failed:
            row.result = "FAIL"
        elif report.when == "call" and report.passed:
            row.result = "pass"
        elif report.when == "call" and report.skipped:
            row.result = "skipped"
    return report


def pytest_sessionfinish(session):
    rows = [r for r in getattr(session.config, "_reliability_rows", []) if r.result != "not run"]
    rel.merge(rows)
