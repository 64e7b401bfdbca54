"""The one look-up of C library functions (workbench/libc.py) that the block reservation, the read ahead and the
dump readers' heap trim share."""
from __future__ import annotations

import ctypes
import os
import sys

import pytest

from workbench.libc import libc_function


def test_an_absent_name_is_none_and_the_next_name_is_tried():
    assert libc_function("workbench_no_such_function") is None
    found = libc_function("workbench_no_such_function", "getpid")
    assert found is not None and found() == os.getpid()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's fallocate64 is Linux's")
def test_a_function_is_looked_up_once_with_its_types():
    first = libc_function("fallocate64", "fallocate", argtypes=(ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64))
    assert first is libc_function("fallocate64", "fallocate")
    assert first.argtypes == [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64] and first.restype is ctypes.c_int
    assert first(-1, 0, 0, 1) == -1 and ctypes.get_errno() == 9          # EBADF: a real call, errno kept
