"""The fault catalog datasets/demo_faults.yaml: what it must hold, and hostile catalogs refused with file:line [key]."""
from __future__ import annotations

import pytest

from workbench.demo.catalog import CODE_KINDS, find_fault, load_faults, load_thresholds, stages
from workbench.errors import InputError

ISSUE_FAULTS = {  # issue 13's list -> (catalog name, first failing stage, plant kind)
    "embedding computed in fp32 vs the rest in fp16": ("embedding_fp16", "precision"),   # the demo computes fp32
    "softmax in fp16": ("softmax_fp16", "precision"),
    "norm epsilon mismatch": ("norm_epsilon", "model"),
    "rotary base mismatch": ("rotary_base", "model"),
    "weight decay on 1-D parameters": ("weight_decay_1d", "optimizer"),
    "optimizer without bias correction": ("no_bias_correction", "optimizer"),
    "a learning-rate schedule mismatch": ("lr_schedule", "schedule"),
    "gate/up swapped in the converted weights": ("gate_up_swapped", "weights"),
    "a data off-by-one step in replay": ("data_off_by_one", "replay"),
    "vocabulary padding mismatch": ("vocab_padding", "weights"),
}


def test_the_shipped_catalog_holds_every_fault_of_the_issue():
    faults = load_faults()
    assert {name: fault.plant.kind for name, fault in faults.items()} == dict(ISSUE_FAULTS.values())
    assert all(fault.stage in stages() and fault.component and fault.why and "TBD" not in fault.why
               for fault in faults.values())
    assert faults["gate_up_swapped"].stage == "weights" and faults["data_off_by_one"].stage == "data"
    assert faults["weight_decay_1d"].stage == faults["no_bias_correction"].stage == "step2_optimizer"
    assert faults["lr_schedule"].stage == "long"
    assert all(faults[name].stage in ("step1_loss", "step1_localnorm")
               for name in ("norm_epsilon", "rotary_base", "softmax_fp16", "embedding_fp16"))


def write(tmp_path, body: str):
    path = tmp_path / "faults.yaml"
    path.write_text("kind: demo_faults\nfaults:\n" + body)
    return path


GOOD = """  - name: wd
    title: t
    stage: step2_optimizer
    component: optimizer
    plant: {kind: optimizer, weight_decay_1d: true}
    why: w
    report: optimizer
"""


def test_a_minimal_catalog_loads(tmp_path):
    fault = load_faults(write(tmp_path, GOOD))["wd"]
    assert fault.plant.kind in CODE_KINDS and fault.plant.values == {"weight_decay_1d": True}


@pytest.mark.parametrize("old,new,line,key,needle", [
    ("stage: step2_optimizer", "stage: step3", 5, "faults.0.stage", "expected one of checklist, weights"),
    ("kind: optimizer,", "kind: kernel,", 7, "faults.0.plant.kind", "expected one of model, precision"),
    ("weight_decay_1d: true", "weight_decay_1d: 1", 7, "faults.0.plant.weight_decay_1d", "is an integer (1), "
                                                                                          "expected true/false"),
    ("weight_decay_1d: true", "decay_everything: true", 7, "faults.0.plant.decay_everything",
     "unknown optimizer value"),
    ("title: t", "title: [1, 2]", 4, "faults.0.title", "expected a non-empty string, found a list"),
    ("why: w", "why: w\n    colour: red", 9, "faults.0.colour", "unknown key 'colour'"),
    ("name: wd", "name: Bad Name", 3, "faults.0.name", "is not a lower-case identifier"),
    ("plant: {kind: optimizer, weight_decay_1d: true}", "plant: {kind: precision, knob: softmax_dtype, dtype: fp8}",
     7, "faults.0.plant.dtype", "expected one of fp32, fp16, bf16"),
    ("plant: {kind: optimizer, weight_decay_1d: true}", "plant: {kind: model, norm_epsilon_layer: -1}",
     7, "faults.0.plant.norm_epsilon_layer", "expected an integer at least 0"),
    ("plant: {kind: optimizer, weight_decay_1d: true}", "plant: {kind: precision, knob: softmax_dtype}",
     7, "faults.0.plant", "a precision plant needs dtype"),
    ("plant: {kind: optimizer, weight_decay_1d: true}", "plant: optimizer", 7, "faults.0.plant",
     "expected a mapping with kind:"),
    ("plant: {kind: optimizer, weight_decay_1d: true}", "plant: {kind: optimizer, weight_decay_1d: true}\n"
     "    parameters: ['(']", 8, "faults.0.parameters.0", "bad regular expression"),
])
def test_hostile_entries_name_the_file_line_and_key(tmp_path, old, new, line, key, needle):
    path = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(InputError) as error:
        load_faults(path)
    assert f"{path}:{line} [{key}]" in str(error.value) and needle in str(error.value)


@pytest.mark.parametrize("text,needle", [
    ("kind: demo_faults\nfaults: {wd: 1}\n", "expected a non-empty list of faults"),
    ("kind: log_formats\nfaults: []\n", "expected kind: demo_faults"),
    ("kind: demo_faults\nfaults:\n  - 3\n", "expected a mapping (name, title, stage, ...), found an integer"),
    ("kind: demo_faults\nfaults:\n  - {name: a}\n", "fault lacks title, stage, component, report, plant, why"),
    ("kind: demo_faults\nfaults:\n" + "  " + "[" * 200 + "]" * 200 + "\n", "nest"),
    ("kind: demo_faults\nfaults:\n" + GOOD + GOOD, "fault 'wd' is listed twice"),
])
def test_hostile_catalogs_are_one_error(tmp_path, text, needle):
    path = tmp_path / "faults.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load_faults(path)
    assert str(path) in str(error.value) and needle in str(error.value)


def test_a_catalog_that_is_not_utf8_is_one_error(tmp_path):
    path = tmp_path / "faults.yaml"
    path.write_bytes(b"kind: demo_faults\nfaults:\n  - name: \xff\xfe\n")
    with pytest.raises(InputError, match="UTF-8"):
        load_faults(path)


def test_an_unknown_name_lists_the_catalog():
    with pytest.raises(InputError, match="unknown fault 'nope' .use one of embedding_fp16, softmax_fp16"):
        find_fault("nope")


def test_an_absurdly_large_catalog_is_refused_before_it_is_read(tmp_path):
    from workbench.input_files import TEXT_LIMIT

    path = tmp_path / "faults.yaml"
    with path.open("wb") as handle:          # sparse: no disk used, the size is what the check sees
        handle.truncate(TEXT_LIMIT + 1)
    with pytest.raises(InputError) as error:
        load_faults(path)
    assert str(path) in str(error.value)


def test_the_thresholds_are_validated(tmp_path):
    assert load_thresholds().step1_loss_rtol == 5e-6
    path = write(tmp_path, GOOD)
    path.write_text(path.read_text() + "thresholds: {step1_loss_rtol: -1, localnorm_floor: 1, localnorm_factor: 3, long_band_margin: 4}\n")
    with pytest.raises(InputError, match=r"faults.yaml:10 \[thresholds.step1_loss_rtol\]: thresholds.step1_loss_rtol is -1"):
        load_thresholds(path)


def test_a_failed_demo_keeps_the_logs_its_error_names_and_nothing_else(tmp_path):
    """The demo folder of a failed run is removed, but the worker log its one-line error names is moved
    beside it first, and the error names the log where it now is."""
    from workbench.cli.demo import keep_named_logs
    from workbench.errors import InputError

    out = tmp_path / "workbench-demo"
    (out / "work").mkdir(parents=True)
    (out / "work" / "dump_megatron.log").write_text("Traceback: the real cause\n")
    (out / "work" / "dump_mindformers.log").write_text("fine\n")
    (out / "report.html").write_text("<html>half made</html>")
    log = (out / "work" / "dump_megatron.log").resolve()
    error = InputError("workbench demo", f"an msprobe dump failed: megatron exit 1 ({log})", "see the log named")

    kept_error = keep_named_logs(error, out)

    assert not out.exists()
    (kept,) = [path for path in tmp_path.iterdir() if path.name.startswith("workbench-demo.logs-")]
    assert sorted(p.name for p in kept.iterdir()) == ["dump_megatron.log"]
    assert str(kept / "dump_megatron.log") in str(kept_error)
    assert (kept / "dump_megatron.log").read_text() == "Traceback: the real cause\n"
    from workbench.fileio import folder_mode
    assert kept.stat().st_mode & 0o777 == folder_mode()


def test_a_failed_demo_whose_error_names_no_log_leaves_nothing(tmp_path):
    from workbench.cli.demo import keep_named_logs
    from workbench.errors import InputError

    out = tmp_path / "demo"
    (out / "work").mkdir(parents=True)
    (out / "work" / "mindformers_runs.log").write_text("x\n")
    error = InputError("plan.yaml", "bad", "fix it")
    assert keep_named_logs(error, out) is error
    assert list(tmp_path.iterdir()) == []
