"""``MegatronReplayDataset``: Megatron's captured batches as a MindFormers (2.1.0) dataset, built from yaml.

    train_dataset: &train_dataset
      data_loader:
        capture_dir: /path/to/capture     # the folder BatchCapture wrote (or the field's step_N/rank_R layout)
        contract: legacy                  # datasets/replay_contracts.yaml: legacy | new
        dp: null                          # target data-parallel size (null: MindFormers' shard count, else 1)
        rank: null                        # this card's data-parallel rank (null: MindFormers' shard id, else 0)
        micro_batch_size: null            # target micro-batch size (null: as captured)
        per_step: true                    # one row per step (runner batch_size x gradient_accumulation_steps)
      input_columns: ["input_ids", "labels"]
      repeat: 1                           # epochs over the captured steps
    train_dataset_task:
      type: MegatronReplayDataset
      auto_register: mindformers_dataset.MegatronReplayDataset   # with run_mindformer.py --register_path
      dataset_config: *train_dataset

How MindFormers 2.1.0 finds it (``mindformers/tools/register/register.py``): ``build_dataset(cfg)`` calls
``MindFormerRegister.get_instance_from_cfg(cfg, MindFormerModuleType.DATASET)``, which pops
``auto_register: FILE.CLASS``, loads ``FILE.py`` from ``$REGISTER_PATH`` (``run_mindformer.py
--register_path DIR`` sets that variable and appends DIR to ``sys.path``; nothing is imported until then)
and registers the class; then it looks ``type`` up in the DATASET registry and calls ``cls(**cfg)``,
i.e. ``MegatronReplayDataset(dataset_config=...)``. Like ``CausalLanguageModelDataset.__new__`` this
returns the ``mindspore.dataset`` pipeline itself. Importing this module when mindformers is importable
registers the class too (``register()``), so ``import workbench.replay.mindformers_dataset`` in a
launcher is the alternative to ``auto_register``. Only absolute ``workbench`` imports here: MindFormers
copies this one file into its modules cache and imports the copy.

mindformers and mindspore are imported inside functions only; without them the module still imports.
"""
from __future__ import annotations


from workbench.installed import mindformers_installed
from typing import Any

DATA_LOADER_KEYS = ("capture_dir", "contract", "dp", "rank", "micro_batch_size", "per_step", "type")


def _get(config: Any, key: str, default: Any = None) -> Any:
    """Key of a dict or a MindFormerConfig (a dict subclass with attribute access)."""
    if config is None:
        return default
    value = config.get(key, default) if hasattr(config, "get") else getattr(config, key, default)
    return default if value is None else value


def _mindformers_shards() -> tuple[int | None, int | None]:
    """(shard_id, num_shards) the way MindFormers' datasets shard (None, None: full batch / unknown)."""
    if not mindformers_installed():
        return None, None
    from mindformers.dataset.base_dataset import BaseDataset

    return BaseDataset._generate_shard_info()  # pylint: disable=protected-access


class MegatronReplayDataset:
    """Replay a Megatron capture in MindFormers; ``MegatronReplayDataset(dataset_config)`` returns the dataset.

    Keys (in ``dataset_config`` / keyword arguments): ``data_loader`` (``capture_dir`` required;
    ``contract``, ``dp``, ``rank``, ``micro_batch_size``, ``per_step``), ``input_columns`` (must be the
    contract's columns, in order, when given), ``batch_size`` (rows per dataset row when given: MindFormers
    sets it to ``runner_config.batch_size``, i.e. per-card batch x gradient_accumulation_steps), ``repeat``.
    """

    def __new__(cls, dataset_config: Any = None, data_loader: Any = None, input_columns: list | None = None,
                batch_size: int | None = None, repeat: int = 1, **kwargs: Any):
        from workbench.errors import InputError

        try:
            return _build(dataset_config, data_loader, input_columns, batch_size, repeat)
        except InputError as error:
            # MindFormers re-raises as type(e)(f"{cls}: {e}"): give it a one-message exception type
            raise ValueError(str(error)) from None


def _build(dataset_config: Any, data_loader: Any, input_columns: list | None, batch_size: int | None, repeat: int):
    """The dataset of :class:`MegatronReplayDataset` (``InputError`` on bad configuration)."""
    from workbench.errors import InputError
    from workbench.replay.mindspore_replay import ReplaySource, dataset_from_source

    if dataset_config:
        data_loader = _get(dataset_config, "data_loader")
        input_columns = _get(dataset_config, "input_columns")
        batch_size = _get(dataset_config, "batch_size")
        repeat = _get(dataset_config, "repeat", 1)
    where = "train_dataset.data_loader"
    if not data_loader or not _get(data_loader, "capture_dir"):
        raise InputError(where, "MegatronReplayDataset needs data_loader.capture_dir",
                         "set it to the folder the Megatron capture wrote")
    unknown = sorted(set(data_loader) - set(DATA_LOADER_KEYS)) if hasattr(data_loader, "keys") else []
    if unknown:
        raise InputError(f"{where}.{unknown[0]}", f"unknown key {unknown[0]!r}",
                         f"allowed: {', '.join(DATA_LOADER_KEYS)}")
    dp, rank = _get(data_loader, "dp"), _get(data_loader, "rank")
    if dp is None or rank is None:
        shard_id, num_shards = _mindformers_shards()
        dp = dp if dp is not None else (num_shards or 1)
        rank = rank if rank is not None else (shard_id or 0)
    options = dict(contract=_get(data_loader, "contract", "legacy"), dp=int(dp), rank=int(rank),
                   epochs=int(repeat or 1), micro_batch_size=_get(data_loader, "micro_batch_size"),
                   per_step=bool(_get(data_loader, "per_step", True)))
    source = ReplaySource(str(_get(data_loader, "capture_dir")), **options)
    if input_columns and list(input_columns) != source.column_names:
        raise InputError("train_dataset.input_columns", f"{list(input_columns)} differ from the "
                         f"'{options['contract']}' contract's columns {source.column_names}",
                         f"write input_columns: {source.column_names}")
    if batch_size:
        rows = source.samples_per_row()
        if rows != int(batch_size):
            unit = "step" if options["per_step"] else "micro-batch"
            raise InputError("train_dataset.batch_size", f"batch_size {batch_size}, but each replayed {unit} "
                             f"holds {rows} samples", "set runner_config.batch_size x gradient_accumulation_steps "
                             "to the samples per step of this rank (or per_step / micro_batch_size)")
    return dataset_from_source(source)


def register() -> bool:
    """Register :class:`MegatronReplayDataset` as a MindFormers DATASET; False when mindformers is absent."""
    if not mindformers_installed():
        return False
    try:
        from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    except ImportError:  # installed but not importable here: nothing to register with
        return False

    MindFormerRegister.register_cls(MegatronReplayDataset, module_type=MindFormerModuleType.DATASET)
    return True


register()
