"""Suite-wide: the cache of parsed knowledge YAML (workbench/yaml_cache.py) lives in a folder of this test
session, never in the user's ~/.cache, and starts empty, so every run exercises a miss and then hits."""
from __future__ import annotations

import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="workbench-test-cache-")


def pytest_configure(config):
    os.environ["WORKBENCH_CACHE_DIR"] = _CACHE          # subprocesses the tests start inherit it


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)
