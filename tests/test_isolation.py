"""Tests do not leak environment variables into later tests (tests/conftest.py restores
``os.environ`` after each one): a kernel or server that a later test starts would inherit them.
The two tests run in this order, on one xdist worker (one module, one group)."""

from __future__ import annotations

import os

from dtf.cluster.env import GRPC_ENV, apply_grpc_options

BEFORE: dict[str, str | None] = {}


def test_a_test_applies_the_grpc_options_in_this_process():
    """What LocalCluster.start() does: TF_GRPC_DEFAULT_OPTIONS set in the test's process."""
    BEFORE[GRPC_ENV] = os.environ.get(GRPC_ENV)
    apply_grpc_options(override=True)
    assert "keepalive_time_ms" in os.environ[GRPC_ENV]
    os.environ["DTF_LEAK_PROBE"] = "1"


def test_the_next_test_does_not_inherit_them():
    """The variables the previous test set are gone again."""
    assert "DTF_LEAK_PROBE" not in os.environ
    assert os.environ.get(GRPC_ENV) == BEFORE[GRPC_ENV]
