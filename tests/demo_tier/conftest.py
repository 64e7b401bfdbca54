"""The demo tier: one `workbench demo --fault NAME` per fault of the catalog (a minute or more each on 2
cores), so it runs apart from the default suite: ``./scripts/test-demo.sh`` (CI runs it). Without
``WORKBENCH_DEMO_TIER=1`` every test here skips with that reason."""
from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("WORKBENCH_DEMO_TIER") == "1":
        return
    skip = pytest.mark.skip(reason="the demo tier runs with ./scripts/test-demo.sh (WORKBENCH_DEMO_TIER=1)")
    for item in items:
        if "demo_tier" in str(item.fspath):
            item.add_marker(skip)
