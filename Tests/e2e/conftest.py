"""Fixtures for the real test stack: moto (S3/STS/IAM with auth on), the fake Photolala
backend and the fault proxy. All lazy: suites that do not ask for them start nothing."""
import pytest

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


def pytest_configure(config):
    config.addinivalue_line("markers", "packaging: builds the .deb or boots it under a real systemd (runs by default)")
