"""A cluster notebook that fails half way leaves no TensorFlow server process behind.

Notebook 07 is run by the course's runner without its clean-up (``tools.nbrun.execute`` with
``cleanup=False``; ``make run`` would stop leftovers itself) with a parameter that makes a cell
fail after its cluster has started. Every process it starts inherits a token in its
environment; once the runner has given up, none of them may be left: the kernel's exit stops
the ``LocalCluster`` (an ``atexit`` hook), and the servers also exit by themselves when their
parent goes (their standard input closes).
"""

from __future__ import annotations

import threading
import time
import uuid

import psutil
import pytest

from tests.helpers import ROOT
from tools import nbrun

TOKEN_ENV = "DTF_FAILURE_TEST_TOKEN"


def tagged(token: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(TOKEN_ENV) == token:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


@pytest.mark.slow
def test_a_cluster_notebook_that_fails_half_way_leaves_no_server(tmp_path, monkeypatch):
    token = uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_ENV, token)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    servers: set[str] = set()  # what the run started, sampled while it runs
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            for proc in tagged(token):
                try:
                    servers.update(a for a in proc.cmdline() if a.startswith("dtf."))
                except psutil.Error:
                    pass

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with pytest.raises(nbrun.NotebookError) as failure:
        nbrun.execute(
            ROOT / "notebooks" / "07_remote_servers.ipynb",
            parameters={"ERROR_WITHIN_S": 1e-7},  # no dead worker is reported that fast
            output_path=tmp_path / "07.ipynb",
            timeout=120,
            cleanup=False,  # the notebook must clean up after itself
        )
    done.set()
    sampler.join(timeout=10)
    assert failure.value.ename == "AssertionError"
    assert servers, "no server process of the run was seen: is the token inherited?"
    executed = (tmp_path / "07.ipynb").read_text(encoding="utf-8")
    assert "dtf-server ready" in executed, "the failure must come after the cluster started"
    deadline = time.monotonic() + 20
    while True:
        left = tagged(token)
        if not left:
            break
        assert time.monotonic() < deadline, [p.cmdline() for p in left]
        time.sleep(0.2)
