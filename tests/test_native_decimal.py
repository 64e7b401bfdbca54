"""dump.json's numbers as the compiled scanner reads them (workbench/native/decimal.h, else strtod) are
``float(token)`` bit for bit: shortest reprs of random bit patterns, of the statistics a dump holds, random
digit strings with and without exponents, tokens past 19 digits or 10^±27, and the midpoints between doubles
that one x87 rounding cannot decide (those must go to strtod). The scanner's own columns are held to the Python
reader's in tests/test_dump_native.py."""
from __future__ import annotations

import ctypes
import random
import struct

import pytest

from workbench.native import library


def _reader():
    scanner = library("dumpscan")
    if scanner is None:
        pytest.skip("the dumpscan library is not built (python workbench/native/build.py)")
    function = scanner.dumpscan_number
    function.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)]
    function.restype = ctypes.c_int
    out, fast = ctypes.c_double(), ctypes.c_int()

    def read(token: str) -> tuple[int, float, int]:
        raw = token.encode()
        code = function(raw, len(raw), ctypes.byref(out), ctypes.byref(fast))
        return code, out.value, fast.value
    return read


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


def _tokens(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    tokens = []
    for _ in range(count):
        value = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if value == value and abs(value) != float("inf"):
            tokens.append(repr(value))
        tokens.append(repr(rng.gauss(0.0, 1.0) * 10.0 ** rng.randint(-12, 12)))
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 22)))
        whole, part = digits[:rng.randint(0, len(digits))].lstrip("0") or "0", digits[len(digits) // 2:] or "0"
        token = rng.choice(["", "-"]) + whole + "." + part
        if rng.random() < 0.4:
            token += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 45))
        tokens.append(token)
    return tokens


def test_every_number_token_reads_as_float():
    read = _reader()
    tokens = _tokens(21, 60_000)
    wrong = [(t, v) for t in tokens for code, v, _ in [read(t)] if code != 0 or _bits(v) != _bits(float(t))]
    assert not wrong, wrong[:5]


def test_the_statistics_a_dump_holds_take_the_fast_path():
    read = _reader()
    rng = random.Random(22)
    tokens = [repr(rng.gauss(0.0, 1.0) * 10.0 ** rng.randint(-8, 8)) for _ in range(20_000)]
    results = [read(t) for t in tokens]
    assert all(code == 0 and _bits(v) == _bits(float(t)) for t, (code, v, _) in zip(tokens, results, strict=True))
    fast = sum(f for *_, f in results)
    if fast == 0:
        pytest.skip("no x87 with 64-bit rounding here (e.g. under valgrind): strtod reads every number")
    assert fast > 0.99 * len(tokens)


@pytest.mark.parametrize("token", [
    "9007199254740993.0", "9007199254740995.0", "18014398509481986.0", "1152921504606847104.0",   # midpoints
    "9007199254740993.000", "0.1", "-0.0", "0.0", "-0e-5", "0e400", "1e27", "1e-27", "1e28", "1e-28",
    "1234567890123456789.0", "12345678901234567890.0", "0.00000000000000000000000000001234", "1.7976931348623157e308",
    "2.2250738585072014e-308", "4.9406564584124654e-324", "1e400", "-1e400", "1e-400", "123.456e-5", "5E+3"])
def test_edge_tokens_read_as_float(token):
    code, value, fast = _reader()(token)
    assert code == 0 and _bits(value) == _bits(float(token))
    if token.startswith(("9007199254740993", "9007199254740995", "18014398509481986", "1152921504606847104")):
        assert not fast                       # a midpoint between doubles: one x87 rounding cannot decide it


def test_what_is_not_a_whole_number_token_is_refused():
    read = _reader()
    assert read("1.5x")[0] == -1 and read("1.")[0] == -1 and read("")[0] == -1 and read("-")[0] == -1
    assert read("1" * 70 + ".5")[0] == -1                                  # longer than the scanner reads


def _block_tokens() -> list[str]:
    """Tokens whose significant digits fall on each side of decimal.h's 8-digit blocks: leading zeros before or
    after the point (not significant), 1 to 21 significant digits split anywhere between the integer part and the
    fraction, zeros inside and at the end, and a non-digit right after a block."""
    rng = random.Random(23)
    tokens = []
    for count in range(1, 22):
        for _ in range(40):
            digits = str(rng.randint(1, 9)) + "".join(rng.choice("0123456789" if rng.random() < 0.8 else "0")
                                                      for _ in range(count - 1))
            split = rng.randint(0, count)
            whole, part = digits[:split] or "0", "0" * rng.choice([0, 0, 1, 7, 8, 9]) + digits[split:]
            if whole == "0" and split:
                whole = digits[:split]
            token = rng.choice(["", "-"]) + whole + ("." + part if part else "")
            if "." not in token:
                token += ".0"
            if rng.random() < 0.3:
                token += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 30))
            tokens.append(token)
    return tokens + ["0.12345678", "12345678.0", "1234567812345678.0", "0.1234567812345678", "0.00000000123456781",
                     "1234567890123456789.0", "123456789012345678.9", "0.12345678901234567891", "0.000000001"]


def test_digits_read_eight_at_a_time_equal_float():
    read = _reader()
    tokens = _block_tokens()
    results = [read(t) for t in tokens]
    wrong = [(t, v) for t, (code, v, _) in zip(tokens, results, strict=True) if code != 0 or _bits(v) != _bits(float(t))]
    assert not wrong, wrong[:5]
    if sum(f for *_, f in results):          # the x87 path runs here: it decides all but the longest and the far
        assert sum(f for *_, f in results) > 0.6 * len(tokens)                    # exponents (and rare midpoints)
