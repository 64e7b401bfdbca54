"""The fast paths of the log readers against their exact per-line parsers: same tables, notes, facts
and errors, bit for bit, on logs with every field form, on the reference trainers' logs, with chunk
boundaries falling inside records and inside local-norm blocks, CRLF line ends and no final newline.
And the number parser (``fastnum``) against ``float`` itself."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import workbench.logs.fastnum as fastnum
import workbench.logs.lines as lines
from workbench.errors import InputError
from workbench.logs.formats import load_formats
from workbench.logs.megatron import read_megatron
from workbench.logs.mindformers import read_mindformers
from workbench.reference.mindformers_log import (format_local_norm_message, format_loss_message,
                                                 format_param_groups, line_prefix)

CHUNKS = (8 << 20, 4096, 333)           # the last two cut records and local-norm blocks in many places


def same_bits(got, want) -> bool:
    return all((a == b and math.copysign(1, a) == math.copysign(1, b)) or (a != a and b != b)
               for a, b in zip(got, want, strict=True))


# ------------------------------------------------------------- fastnum ----------------------------

@pytest.mark.parametrize("seed", range(6))
def test_fastnum_equals_float_bit_for_bit(seed, monkeypatch):
    monkeypatch.setattr(fastnum, "SLAB", 7)                 # slabs of 7 rows: their seams are tested too
    rng = np.random.default_rng(seed)
    forms = ["%.6E", "%.3f", "%12d", "%.1f", "%+.3e", "%.9e", "%.15e", "%.17g", "%.20f", "%5d"]
    for form in forms:
        values = rng.normal(0, 10.0 ** rng.integers(-30, 30), 50)
        text = " ".join(form % (int(v) if form.endswith("d") else v) for v in values)
        got = fastnum.token_floats(text.encode(), 50)
        if got is not None:                                  # None: the caller's exact path reads it
            assert same_bits(got.tolist(), [float(t) for t in text.split()]), (form, text[:80])
    printed = str((rng.random(1000) * 10.0 ** rng.integers(-30, 30, 1000)).astype(np.float32))
    want = [float(t) for t in printed.replace("[", " ").replace("]", " ").split()]
    assert same_bits(fastnum.token_floats(printed.encode(), len(want)).tolist(), want)


def test_fastnum_edge_values_and_what_it_leaves_to_the_exact_path():
    for edge in "0 -0.0 1. .5 5e3 0e-500 1e22 9e22 123456789012345678 -0 1e-30 +7 4.9e-324 1E+05".split():
        got = fastnum.token_floats(f"{edge} {edge}".encode(), 2)          # one layout per call
        assert got is not None and same_bits(got.tolist(), [float(edge)] * 2), edge
    for text in ("nan", "None", "1e 5", "5ms", "1.2.3", "--5", "inf", "0x10", "1e99999"):
        assert fastnum.token_floats(f"1.0 {text}".encode(), 2) is None, text
    assert fastnum.token_floats(b"1.0 2.0", 3) is None                       # a count that is not there
    assert fastnum.batch_floats([b"[1.0 2.0", b"3.0]"], [1, 2]) is None      # right total, wrong split
    assert fastnum.batch_floats([b"[1.0 2.0]", b"[3.0]"], [2, 1]).tolist() == [1.0, 2.0, 3.0]


# ------------------------------------------------------------- MindFormers ------------------------

def mindformers_log(newline: str = "\n", final: bool = True) -> bytes:
    """Param groups, monitor lines, and blocks in every numpy form: scientific, fixed, negative,
    tiny, summarised (> 1000 values), and a block after the last step line."""
    rng = np.random.default_rng(3)
    prefix = line_prefix()
    names = [(f"layer{i}.weight", (4, 4)) if i % 3 else (f"layer{i}.bias", (4,)) for i in range(40)]
    out = (prefix + format_param_groups(names, 0.1)).split("\n")
    forms = [rng.normal(0, 1, 40), rng.random(40) * 10, rng.random(40) * 10.0 ** rng.integers(-30, 3, 40),
             np.ones(40), rng.random(40) * 1e-3]
    for step, values in enumerate(forms * 2, start=1):
        sizes = [16 if i % 3 else 4 for i in range(40)]
        out += (prefix + format_local_norm_message(sizes, values.astype(np.float32))).split("\n")
        out.append(prefix + f"Epoch:[  1/  1], step:[{step:5d}/   10] local_norm/layer1.weight: 0.5")
        out.append(prefix + f"Epoch:[  1/  1], step:[{step:5d}/   10] device_local_norm: 1.25")
        out.append(prefix + format_loss_message(1, 1, step, 10, 5.0 - step / 3, 1000, 1e-5, 1.5))
    out += (prefix + format_local_norm_message([4] * 1500, np.arange(1500, dtype=np.float32))).split("\n")
    out.append(prefix + format_loss_message(1, 1, 11, 12, 1.0, 1000, 1e-5, 1.5))
    out += (prefix + format_local_norm_message([4] * 40, np.arange(40, dtype=np.float32))).split("\n")
    return (newline.join(out) + (newline if final else "")).encode()


def assert_same(fast, exact):
    pd.testing.assert_frame_equal(fast.series, exact.series, check_exact=True)
    pd.testing.assert_frame_equal(fast.local_norms, exact.local_norms, check_exact=True)
    assert (fast.notes, fast.facts, fast.param_order) == (exact.notes, exact.facts, exact.param_order)


@pytest.mark.parametrize("newline,final", [("\n", True), ("\r\n", True), ("\n", False)])
def test_mindformers_fast_path_equals_the_line_parser(tmp_path, monkeypatch, newline, final):
    path = tmp_path / "info.log"
    path.write_bytes(mindformers_log(newline, final))
    fmt = load_formats()["mindformers"]
    exact = read_mindformers(path, fmt, fast=False)
    assert len(exact.local_norms) > 400 and any("summarised" in note for note in exact.notes)
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        assert_same(read_mindformers(path, fmt), exact)


def test_mindformers_blocks_the_fast_path_must_not_take(tmp_path, monkeypatch):
    """A block with a stray line, one with a non-ASCII blank (U+00A0), a cut one, a non-UTF-8 line,
    and a bad count: what the line parser says, in both paths and at every chunk size."""
    prefix = line_prefix()
    block = (prefix + format_local_norm_message([4] * 40, np.arange(40, dtype=np.float32))).split("\n")
    step = prefix + format_loss_message(1, 1, 1, 10, 2.0, 1000, 1e-5, 1.5)
    stray = block[:4] + ["a log line inside the array"] + block[4:] + [step]
    data = "\n".join(stray).encode() + b"\n" + "\n".join(block[:3]).encode() + "\u00a0\n".encode() + \
        "\n".join(block[3:] + [step]).encode() + b"\n\xff " + step.encode() + b"\n" + "\n".join(block[:5]).encode()
    path = tmp_path / "odd.log"
    path.write_bytes(data)
    fmt = load_formats()["mindformers"]
    exact = read_mindformers(path, fmt, fast=False)
    assert any("not UTF-8" in note for note in exact.notes) and any("cut off" in note for note in exact.notes)
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        assert_same(read_mindformers(path, fmt), exact)
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join((prefix + format_local_norm_message([4] * 41, np.ones(40, np.float32))).split("\n")
                             + [step]) + "\n")
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        for fast in (True, False):
            with pytest.raises(InputError, match=rf"{bad}:1: local_norm block has 40 values but norm_size lists 41"):
                read_mindformers(bad, fmt, fast=fast)


# ------------------------------------------------------------- Megatron ---------------------------

def megatron_log(newline: str = "\n", final: bool = True) -> bytes:
    """Every field form: rank prefixes, timestamp or not, nan / absent grad norm, MoE and MTP terms,
    throughput, widths that change (grad norm past 10, loss scale powers of two), junk with '|',
    named local norms, a line cut before its last '|'."""
    out = []
    for i in range(1, 400):
        head = ["", " [2025-01-01 12:00:00]", "[default3]:", "7:  "][i % 4] if i > 200 else " [2025-01-01 12:00:00]"
        fields = [f"consumed samples: {i * 8:12d}", f"elapsed time per iteration (ms): {1000 + i * 37.3:.1f}",
                  f"throughput per GPU (TFLOP/s/GPU): {100 + i / 7:.1f}", f"learning rate: {1e-5 / i:.6E}",
                  "global batch size:     8", f"lm loss: {10 / i:.6E}", f"loss scale: {2.0 ** (i % 20):.1f}",
                  f"grad norm: {100 / i:.3f}" if i % 7 else "grad norm: nan",
                  f"load_balancing_loss: {i / 1e3:.6E}" if i % 3 == 0 else "num zeros: 0.0",
                  f"mtp_1 loss: {1 / i:.6E}" if i % 5 == 0 else "params norm: 12.500",
                  "number of skipped iterations:   0", f"number of nan iterations: {i % 2:3d}"]
        if i % 11 == 0:
            fields = fields[:5] + fields[6:]                       # a field left out
        out.append(f"{head} iteration {i:8d}/     400 |" + "".join(f" {f} |" for f in fields))
        if i % 10 == 0:
            out.append("(min, max) time across ranks (ms): | forward-backward ...: (1.0, 2.0)")
        if i % 50 == 0:
            out.append(f"local_norm/layer{i}.weight: {i / 3:.6E}")
    out.append(out[-2][:-20])                                       # cut before its last '|'
    return (newline.join(out) + (newline if final else "")).encode()


@pytest.mark.parametrize("newline,final", [("\n", True), ("\r\n", True), ("\n", False)])
def test_megatron_fast_path_equals_the_line_parser(tmp_path, monkeypatch, newline, final):
    path = tmp_path / "train.log"
    path.write_bytes(megatron_log(newline, final))
    fmt = load_formats()["megatron"]
    exact = read_megatron(path, fmt, fast=False)
    assert exact.series["rank"].nunique() == 3 and exact.series["value"].isna().any()
    assert any("cut off" in note for note in exact.notes) and len(exact.local_norms) == 7
    for chunk in CHUNKS:
        monkeypatch.setattr(lines, "CHUNK", chunk)
        assert_same(read_megatron(path, fmt), exact)


# ------------------------------------------------------------- reference trainers -----------------

def test_reference_logs_read_the_same_both_ways(tmp_path):
    pytest.importorskip("torch")
    from workbench.reference.config import ModelConfig, PrecisionConfig, TrainConfig, synthetic_batches
    from workbench.reference.torch_model import build_model
    from workbench.reference.torch_train import MegatronStyleTrainer

    cfg = ModelConfig()
    train = TrainConfig(steps=3, decay_style="linear", lr=1e-3, min_lr=1e-4, log_local_norms=True)
    trainer = MegatronStyleTrainer(build_model(cfg, PrecisionConfig(), seed=0), train)
    trainer.train(3, synthetic_batches(cfg, 3), log_path=tmp_path / "train.log")
    fmt = load_formats()["megatron"]
    exact = read_megatron(tmp_path / "train.log", fmt, fast=False)
    assert not exact.local_norms.empty
    assert_same(read_megatron(tmp_path / "train.log", fmt), exact)


def test_plain_logs_take_the_fast_paths(tmp_path, monkeypatch):
    """Spies (not mocks: the real functions run) count the exact parsers' calls, to show that the plain
    numpy-printed blocks and uniform iteration lines of a real log never reach them."""
    import workbench.logs.megatron as megatron
    import workbench.logs.mindformers as mindformers

    calls = {"block": 0, "line": 0}
    block_values, slow_line = mindformers._block_values, megatron._slow_line

    def counted(name, function):
        def spy(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return spy
    monkeypatch.setattr(mindformers, "_block_values", counted("block", block_values))
    monkeypatch.setattr(megatron, "_slow_line", counted("line", slow_line))
    prefix = line_prefix()
    mf = tmp_path / "mf.log"
    mf.write_text("\n".join(prefix + format_local_norm_message([4] * 1000, np.random.default_rng(step).random(
        1000, dtype=np.float32)) + "\n" + prefix + format_loss_message(1, 1, step, 5, 1.0, 10, 1e-5, 1.0)
        for step in range(1, 6)) + "\n")
    assert len(read_mindformers(mf, load_formats()["mindformers"]).local_norms) == 5000 and calls["block"] == 0
    meg = tmp_path / "meg.log"
    meg.write_text("".join(f" iteration {i:8d}/     100 | lm loss: {1 / i:.6E} | grad norm: {i / 7:.3f} |\n"
                           for i in range(1, 101)))
    assert len(read_megatron(meg, load_formats()["megatron"]).series) == 200 and calls["line"] == 0


def test_memory_follows_the_chunk_and_the_values_not_the_text(tmp_path, monkeypatch):
    """12 MB of iteration lines whose values are padded with 1,000 blanks: the reader keeps the parsed
    numbers (8 bytes each), never the columns' text, so the peak stays near a few chunks."""
    import tracemalloc

    monkeypatch.setattr(lines, "CHUNK", 256 << 10)
    path = tmp_path / "padded.log"
    pad = " " * 1000
    path.write_text("".join(f" iteration {i:8d}/   20000 | lm loss:{pad}{1 / i:.6E} | grad norm:{pad}{i:.3f} |\n"
                            for i in range(1, 6001)))
    assert path.stat().st_size > 12e6
    tracemalloc.start()
    try:
        got = read_megatron(path, load_formats()["megatron"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(got.series) == 12000 and got.metric("grad_norm")[6000] == 6000.0
    assert peak < 5e6, f"peak {peak / 1e6:.1f} MB while reading {path.stat().st_size / 1e6:.0f} MB"


def test_an_absurd_norm_size_is_one_line(tmp_path):
    path = tmp_path / "absurd.log"
    path.write_text(line_prefix() + " norm_size: (4, 99999999999999999999999)\nlocal_norm:\n[1. 2.]\n")
    for fast in (True, False):
        with pytest.raises(InputError, match=rf"^{path}:1: norm_size holds a number larger than any tensor"):
            read_mindformers(path, load_formats()["mindformers"], fast=fast)


def test_typed_frame_equals_frame():
    """The series table built column by column equals the one pandas infers cell by cell."""
    from workbench.logs.schema import SERIES_COLUMNS
    from workbench.logs.tables import frame, typed_frame

    rows = [("run", -1, 3, "loss", 1.5, 10), ("run", 0, -(1 << 62), "lr", math.nan, 11),
            ("run", 2, 1 << 62, "grad_norm", -0.0, 12), ("run", -1, 4, "loss", np.float64(2.5), 13)]
    for some in (rows, rows[:1], []):
        pd.testing.assert_frame_equal(typed_frame(some, SERIES_COLUMNS), frame(some, SERIES_COLUMNS), check_exact=True)


@pytest.mark.parametrize("said", [0, 10, 5000])
def test_a_log_that_grows_while_read_is_read_whole(tmp_path, monkeypatch, said):
    """The read buffer is sized from the file's size at open; a log still being written (larger when
    read than said) is read on, every line once, in chunks cut at line ends."""
    import os

    path = tmp_path / "growing.log"
    text = b"".join(b"line %d " % i + b"x" * (i % 97) + b"\n" for i in range(3000)) + b"last, no line end"
    path.write_bytes(text)
    real = os.fstat

    class Said:
        def __init__(self, fd):
            self.st_size = min(said, real(fd).st_size)
    monkeypatch.setattr(lines.os, "fstat", Said)
    monkeypatch.setattr(lines, "CHUNK", 4096)
    for exact in (False, True):
        got, first_lines = [], []
        for first, buffer, size in lines.spans(path, [], exact=exact):
            got.append(bytes(buffer[:size]))
            first_lines.append(first)
        assert b"\n".join(got) == text and first_lines[0] == 1
        assert first_lines == [1 + sum(chunk.count(b"\n") + 1 for chunk in got[:i]) for i in range(len(got))]


def test_block_values_are_one_slice_only_when_written_in_a_row():
    """The local-norm table takes its values as one slice of the array the blocks were read into
    only when each block's ``at`` follows the one before in the same array; a gap, another array or
    an unknown offset gives a copy (``norm_frame`` equal either way)."""
    from workbench.logs.norm_rows import NormBlock, _contiguous, norm_frame

    array, sizes = np.arange(12, dtype=np.float64), np.array([1, 2, 3], dtype=np.int64)
    def blocks(*starts, source=array):
        return [NormBlock(1 + index, sizes, None, source[start:start + 3], step=index + 1, at=start)
                for index, start in enumerate(starts)]
    row = blocks(3, 6, 9)
    assert np.shares_memory(_contiguous(row), array) and _contiguous(row).tolist() == list(range(3, 12))
    other = array.copy()
    for odd in (blocks(0, 6), blocks(3, 6, source=other)[:1] + blocks(6), blocks(-1, 2)):
        assert _contiguous(odd) is None
    gap = norm_frame(blocks(0, 6), "run", 0)
    assert gap["value"].tolist() == [0, 1, 2, 6, 7, 8] and not np.shares_memory(gap["value"].to_numpy(), array)
    assert gap["step"].tolist() == [1] * 3 + [2] * 3 and gap["numel"].tolist() == [1, 2, 3] * 2


def test_norm_frame_text_columns_equal_frame_and_take_names():
    """``norm_frame``'s ``param`` and ``definition`` (Categoricals built from codes) equal
    ``tables.frame`` over the rows written out one by one, for uniform blocks, blocks of several
    definitions and lengths, and an empty block; names set into ``param`` (``set_texts``, as ``Param
    groups`` and ``attach_names`` do) leave ``definition`` as it was and the other rows' names."""
    from workbench.logs.norm_rows import NormBlock, norm_frame
    from workbench.logs.schema import LOCAL_NORM_COLUMNS
    from workbench.logs.tables import frame, set_texts

    sizes, few = np.array([4, 5, 6], dtype=np.int64), np.array([7], dtype=np.int64)
    def block(step, definition, sizes=sizes, positions=None):
        count = len(sizes) if positions is None else len(positions)
        return NormBlock(10 * step, sizes, positions, np.arange(count, dtype=np.float64) + step, step=step,
                         definition=definition)
    cases = [[block(1, "sum_sq"), block(2, "sum_sq")],
             [block(1, "sum_sq"), block(2, "norm"), block(3, "sum_sq", few),
              block(4, "norm", positions=np.array([0, 2], dtype=np.int64)), block(5, "x", few, np.zeros(0, np.int64))]]
    for blocks in cases:
        rows = [("run", 0, b.step, -1, p, "", int(b.numel()[i]), float(b.values[i]), b.definition, b.first)
                for b in blocks for i, p in enumerate(range(len(b)) if b.positions is None else b.positions.tolist())]
        got = norm_frame(blocks, "run", 0)
        pd.testing.assert_frame_equal(got, frame(rows, LOCAL_NORM_COLUMNS), check_exact=True)
        assert isinstance(got["param"].dtype, pd.CategoricalDtype) and isinstance(got["definition"].dtype, pd.CategoricalDtype)
        definitions = got["definition"].tolist()
        got["param"] = set_texts(got["param"], [0, 1], ["w1", "w2"])
        assert got["param"].tolist()[:3] == ["w1", "w2", ""] and got["definition"].tolist() == definitions
        assert list(got["param"].cat.categories) == sorted({"w1", "w2", ""} if len(got) > 2 else {"w1", "w2"})
