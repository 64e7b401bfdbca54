"""The MindFormers yaml files ``workbench align prepare`` writes load with REAL MindFormers 2.1.0
(``MindFormerConfig``, the reader ``run_mindformer.py --config`` uses), with the settings the runs need."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mindformers", reason="real MindFormers is not installed in this venv: the MindFormers "
                                          "tier runs with scripts/test-mindformers.sh")

from mindformers.tools.register import MindFormerConfig  # noqa: E402

from workbench.align.prepare import prepare  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_written_yaml_loads_with_mindformers(tmp_path):
    out = tmp_path / "align"
    prepare(ROOT / "checklists/examples/llama_tiny_megatron.sh", ROOT / "checklists/examples/llama_tiny_mindformers.yaml",
            out, layers=1)
    for name in ("step12", "lr0", "long"):
        config = MindFormerConfig(str(out / f"mindformers/{name}.yaml"))
        assert config.train_dataset_task.type == "MegatronReplayDataset"
        assert config.train_dataset_task.dataset_config.data_loader.capture_dir == str(out / f"capture/megatron_{name}")
        assert list(config.train_dataset.input_columns) == ["input_ids", "labels"]
        assert config.context.deterministic == "ON"
        assert config.model.model_config.num_layers == 1
        assert config.lr_schedule.total_steps == (2 if name == "step12" else 1000)
        assert config.load_checkpoint == str(out / "checkpoints/mindformers_init.ckpt")
    step12 = MindFormerConfig(str(out / "mindformers/step12.yaml"))
    assert step12.runner_wrapper.local_norm is True and step12.lr_schedule.type == "ConstantWarmUpLR"
    assert step12.parallel.enable_parallel_optimizer is False
