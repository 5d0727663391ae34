"""Fixtures of the Python host's end-to-end suite: a real `slipway agent`
(SLIPWAY_BIN, built by the Go test that runs this suite) serving
testdata/graphs/py-agent with this interpreter's virtualenv, driven through
the official langgraph-sdk."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from langgraph_sdk import get_client

ROOT = Path(__file__).resolve().parents[5]
PROJECT = ROOT / "testdata" / "graphs" / "py-agent"


def free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class Agent:
    """One `slipway agent` process on its own data directory."""

    def __init__(self, config: Path, **env: str) -> None:
        self.data = tempfile.mkdtemp(prefix="pyhost-")
        self.addr = free_addr()
        self.url = f"http://{self.addr}"
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", ""),
            "SLIPWAY_GRAPH_CONFIG": str(config),
            "SLIPWAY_AGENT_DATA_DIR": self.data,
            "SLIPWAY_AGENT_ADDR": self.addr,
            "SLIPWAY_AGENT_PYTHON": sys.executable,
            "SLIPWAY_LOG_LEVEL": "warn",
            **env,
        }
        # On PostgreSQL (TestPyHostThroughSDKOnPostgres): a fresh schema
        # for each agent, made by the Go test.
        if mint := os.environ.get("PYHOST_POSTGRES_MINT"):
            with urllib.request.urlopen(mint, timeout=30) as r:
                self.env["SLIPWAY_AGENT_POSTGRES_URL"] = r.read().decode()
        # With Redis too (TestPyHostThroughSDKOnPostgresAndRedis): each
        # agent's run bus under a key prefix of its own, below the test's.
        if redis_url := os.environ.get("PYHOST_REDIS_URL"):
            self.env["SLIPWAY_AGENT_REDIS_URL"] = redis_url
            self.env["SLIPWAY_AGENT_REDIS_PREFIX"] = os.environ["PYHOST_REDIS_PREFIX"] + os.path.basename(self.data) + ":"
        self.proc: subprocess.Popen | None = None
        self.log = open(os.path.join(self.data, "agent.log"), "ab")

    def start(self) -> None:
        self.proc = subprocess.Popen([os.environ["SLIPWAY_BIN"], "agent"], env=self.env, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"slipway agent exited {self.proc.returncode}:\n{self.logs()}")
            try:
                with urllib.request.urlopen(self.url + "/ok", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"slipway agent did not start:\n{self.logs()}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def logs(self) -> str:
        self.log.flush()
        return Path(self.data, "agent.log").read_text(errors="replace")

    def close(self) -> None:
        self.stop()
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture(scope="session")
def agent():
    # A short cancel grace: the stuck-node test waits it out.
    a = Agent(PROJECT / "langgraph.json", SLIPWAY_HOST_CANCEL_GRACE_SECONDS="1")
    a.start()
    yield a
    if os.environ.get("PYHOST_PRINT_LOGS"):
        print(a.logs())
    a.close()


@pytest.fixture
def own_agent():
    a = Agent(PROJECT / "langgraph.json")
    a.start()
    yield a
    a.close()


@pytest.fixture
def client(agent):
    return get_client(url=agent.url, timeout=30)
