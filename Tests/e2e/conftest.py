"""Fixtures for the real test stack: moto (S3/STS/IAM with auth on), the fake Photolala
backend and the fault proxy. All lazy: suites that do not ask for them start nothing.

The stack speaks plain HTTP unless a test asks for HTTPS by parametrizing `scheme`
(`@pytest.mark.parametrize("scheme", ["http", "https"])`): then moto, the backend and the
proxy serve TLS with a certificate from a test CA made at run time (support/tls.py), and
`World` gives the daemon that CA as `tls.ca_file`.

Parallel runs (pytest-xdist, `-n N --dist loadgroup`, as scripts/test runs them): each
worker has its own session fixtures (its own moto), every port comes from the worker's
own range (support/run.py) and every file from tmp_path. A module whose tests share one
expensive thing in order (a booted container, a Ceph cluster, a lost NAS) is one
`xdist_group`, so one worker runs it whole. A test marked `alone` runs with no other
test beside it. The run's output (the reliability report) goes to PHOTOLALA_TEST_OUT,
a temporary directory unless given, printed at the end: never into the checkout."""
import dataclasses
import time

import pytest

from support import reliability as rel
from support import run
from support.fake_backend import FakeBackend
from support.fault_proxy import FaultProxy
from support.stack import MotoServer
from support.tls import TestCA
from support.world import World


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory) -> TestCA:
    """The CA of the HTTPS stack, made once per session; `test_ca.path` is its PEM."""
    return TestCA(tmp_path_factory.mktemp("test-ca"))


@pytest.fixture(scope="session")
def loopback_cert(test_ca):
    """The certificate every HTTPS server of the stack presents: 127.0.0.1 and localhost."""
    return test_ca.issue("loopback")


@pytest.fixture(scope="session")
def moto_http():
    """One moto_server for the whole session (setup costs about a second)."""
    server = MotoServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def moto_https(loopback_cert):
    """The same over TLS, started only by the first test that asks for HTTPS."""
    server = MotoServer(tls=loopback_cert).start()
    yield server
    server.stop()


@pytest.fixture
def scheme() -> str:
    """"http"; a test parametrizes it to run over HTTPS too."""
    return "http"


@pytest.fixture
def moto(request, scheme):
    return request.getfixturevalue(f"moto_{scheme}")


@pytest.fixture
def backend(request, moto, scheme):
    """A fresh fake backend per test, against the shared moto, with an empty bucket."""
    moto.empty_bucket()
    tls = request.getfixturevalue("loopback_cert") if scheme == "https" else None
    b = FakeBackend(moto, tls=tls).start()
    yield b
    b.stop()


@pytest.fixture
def proxy(request, moto, scheme):
    """A fresh fault proxy in front of moto, no faults (over TLS when the stack is)."""
    tls = request.getfixturevalue("loopback_cert") if scheme == "https" else None
    p = FaultProxy(moto.endpoint, tls=tls, upstream_ca=moto.ca_file).start()
    yield p
    p.stop()


@pytest.fixture
def world(tmp_path, moto, backend, proxy):
    """A daemon's world against that backend and moto, through that proxy: its config,
    folders and state under the test's tmp_path (test_rgw.py has its own, against Ceph)."""
    w = World(tmp_path, moto, backend, proxy)
    yield w
    w.close()


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run the long variants of the reliability suites (soak 30 min, more kills, bigger trees)")


_session_config = None   # pytest_runtest_logreport is given no config


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config):
    config.addinivalue_line("markers", "packaging: builds the .deb or boots it under a real systemd (runs by default)")
    config.addinivalue_line("markers", "reliability(suite): a reliability suite of issue 7; writes its row to the run's reliability.md")
    config.addinivalue_line("markers", "rgw: against a local Ceph RADOS Gateway (skipped, with the reason, when Ceph is not installed)")
    config.addinivalue_line("markers", "alone: measures timing, CPU, memory or idleness: runs with no other test of the run beside it")
    global _session_config
    _session_config = config
    config._reliability_rows = []
    config._executed = 0
    if not is_worker(config):
        # Before the workers start, so they inherit PHOTOLALA_TEST_OUT.
        config._output_dir = run.start_run()


# The suites that need the .deb (and the image, the Debian roots): they are built in the
# background from the start of the run (support/nspawn.py) and these suites run last, so
# the builds overlap everything else.
DEB_MODULES = ("test_systemd_nspawn.py", "test_debian13.py", "test_image.py", "test_packaging.py")


def _deb_rank(nodeid: str) -> int:
    path = nodeid.split("::", 1)[0]
    return next((i for i, m in enumerate(DEB_MODULES) if path.endswith(m)), len(DEB_MODULES))


# The tests that upgrade a state of the release before manifest format 2: its photolalad
# is built from this clone's history in the background from the start of the run
# (support/format1.py), and they run late, just before the .deb's suites.
FORMAT1_MODULE = "test_manifest_sealed.py"


def _needs_format1(nodeid: str) -> bool:
    path, _, name = nodeid.partition("::")
    return path.endswith(FORMAT1_MODULE) and any(w in name for w in ("format1", "upgrade"))


def pytest_collection_modifyitems(config, items):
    # The tests that must run alone go first, as one xdist group: one worker runs them
    # back to back while the others wait, instead of the others idling once per test.
    # Those that need the .deb go last (the container's suite before the package's, so
    # its long chain starts first and the package's tests fill the other workers), the
    # format-1 upgrade tests just before them (their old photolalad builds meanwhile).
    # The ten-minute idle watch goes before them: it holds the machine only while it
    # sets up (`step_out`), then only waits, beside the alone tests.
    idle = [i for i in items if _steps_out(i)]
    alone = [i for i in items if i.get_closest_marker("alone") and i not in idle]
    for item in alone:
        item.add_marker(pytest.mark.xdist_group("alone"))
    rest = [i for i in items if not i.get_closest_marker("alone") and i not in idle]
    def rank(i):
        if _deb_rank(i.nodeid) < len(DEB_MODULES):
            return _deb_rank(i.nodeid) + 1
        return 0 if _needs_format1(i.nodeid) else -1
    items[:] = idle + alone + sorted(rest, key=rank)
    if not is_worker(config) and not config.pluginmanager.hasplugin("dsession"):
        _start_deb_build(config, [i.nodeid for i in items])
        _start_format1_build(config, [i.nodeid for i in items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _start_deb_build(node.config, ids)
    _start_format1_build(node.config, ids)


def _start_format1_build(config, nodeids):
    if getattr(config, "_format1_build", False) is not False or config.option.collectonly:
        return
    config._format1_build = None
    if any(_needs_format1(n) for n in nodeids):
        from support.format1 import start_background_build
        config._format1_build = start_background_build()


def _start_deb_build(config, nodeids):
    if getattr(config, "_deb_build", False) is not False or config.option.collectonly:
        return
    config._deb_build = None
    if any(_deb_rank(n) < len(DEB_MODULES) for n in nodeids):
        from support.nspawn import start_background_build
        config._deb_build = start_background_build()


_machine = run.MachineLock()


def _steps_out(item) -> bool:
    return "test_idle.py::" in item.nodeid


def pytest_collection_finish(session):
    # The items left after -k and deselection: the alone tests wait for the idle watch
    # to set up only when it is in the run.
    _machine.awaits_step_out = any(_steps_out(i) for i in session.items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    alone = item.get_closest_marker("alone") is not None
    _machine.enter(alone)
    try:
        return (yield)
    finally:
        if _steps_out(item):
            _machine.mark_stepped_out()
        _machine.leave(keep=alone and nextitem is not None and nextitem.get_closest_marker("alone") is not None)


@pytest.fixture
def machine() -> run.MachineLock:
    """The run's machine lock as this test holds it: `machine.step_out()` once the test
    only waits, so that the alone tests need not wait for it."""
    return _machine


@pytest.fixture
def long_run(request) -> bool:
    """True under --long: suites scale their counts and durations up."""
    return request.config.getoption("--long")


@pytest.fixture
def reliability(request):
    """The test's row in the run's reliability.md; its result is the test's outcome."""
    marker = request.node.get_closest_marker("reliability")
    assert marker, "a test using the reliability fixture needs @pytest.mark.reliability(suite)"
    variant = "long" if request.config.getoption("--long") else "short"
    # A test that gained an HTTPS variant keeps its row's name for the plain-HTTP one.
    name = request.node.name.removesuffix("[http]")
    recorder = rel.Recorder(marker.args[0], name, variant)
    request.node._reliability_row = recorder.row
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
        if report.when == "teardown":
            # The finished row rides on the report to the controlling process.
            report.user_properties.append((rel.PROPERTY, dataclasses.asdict(row)))
    return report


def pytest_runtest_logreport(report):
    """In the controlling process (or the only one): the rows and the count of tests run."""
    config = _session_config
    if config is None or is_worker(config):
        return
    if report.when == "call" and (report.passed or report.failed):
        config._executed += 1
    if report.when == "teardown":
        config._reliability_rows += [v for k, v in report.user_properties if k == rel.PROPERTY]


def pytest_sessionfinish(session):
    config = session.config
    if is_worker(config):
        return
    if getattr(config, "_deb_build", None) is not None:
        from support.nspawn import stop_background_build
        stop_background_build(config._deb_build)
    if getattr(config, "_format1_build", None) is not None:
        from support.nspawn import stop_background_build
        stop_background_build(config._format1_build)
    rows = [r for r in config._reliability_rows if r["result"] != "not run"]
    config._reliability_report = rel.merge(rows)
    # A run that executed no test proves nothing: fail it (pytest's own exit code for
    # "no tests collected"), whether everything was deselected or skipped.
    if session.exitstatus == 0 and config._executed == 0 and not config.option.collectonly:
        config._nothing_ran = True
        session.exitstatus = pytest.ExitCode.NO_TESTS_COLLECTED


def pytest_terminal_summary(terminalreporter, config):
    if is_worker(config):
        return
    tr = terminalreporter
    tr.write_sep("-", "test output")
    report = getattr(config, "_reliability_report", None)
    tr.write_line(f"output directory: {config._output_dir}")
    if report:
        tr.write_line(f"reliability report: {report}")
    if getattr(config, "_nothing_ran", False):
        tr.write_line("no test was executed (all deselected or skipped): failing the run", red=True, bold=True)
