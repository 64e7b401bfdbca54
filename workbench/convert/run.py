"""Convert a checkpoint between formats, streaming one output tensor at a time.

    report = convert("hf_llama/", "llama.ckpt", to="mindformers", verify=True)

The plan is built from headers only (no tensor read); then each output tensor is materialised
from the few source tensors it needs and written at once, so peak memory follows the largest
tensor, not the model. A tensor that is only renamed is copied as its stored byte range, file to
file, never decoded. The output is written and verified in a staging folder beside the destination
and only then renamed into place (``staging.py``); a failure leaves nothing that looks complete.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..gc_pause import gc_paused


@dataclass
class ConversionReport:
    """What one conversion did: the files, the architecture and formats, the sizes, and the tensors written."""

    source: Path
    destination: Path
    arch: str
    source_format: str
    target_format: str
    params: dict
    tensors: int
    bytes_written: int
    seconds: float
    files: list[Path] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    verified: bool = False
    tied: list[str] = field(default_factory=list)        # logical names kept tied (lm_head = embed)
    assumed: list[str] = field(default_factory=list)     # config.json values no config stated (hf)


@dataclass(frozen=True)
class ConvertOptions:
    """The choices of one ``workbench convert`` run (the CLI's options, as the library takes them)."""

    to: str
    arch: str | None = None
    source_format: str | None = None
    config: Path | None = None
    dtype: str | None = None
    pad_vocab_to: int | None = None
    verify: bool = False
    workers: int = 1
    allow_unmapped: bool = False
    progress: bool = False


# The framework a container itself declares (a Megatron checkpoint holds Megatron names even where
# mcore-style MindFormers uses the same ones): only that framework's formats are candidates.
CONTAINER_FRAMEWORK = {"MegatronLegacySource": "megatron", "TorchDistSource": "megatron",
                       "MindSporeCkptSource": "mindformers"}


@dataclass
class DescribedSource:
    """An opened source with its architecture, format and the sizes its carried config gives."""

    source: object
    arch: object
    format: str
    given: dict

    @property
    def params(self):
        """Shape parameters: stated ones, the rest inferred from tensor shapes (errors say what settles them)."""
        from .. import spec

        return spec.infer_params(self.source.metas(), self.format, self.arch, self.given)


def describe_source(path: Path | str, arch: str | None = None, source_format: str | None = None,
                    config: Path | None = None, allow_unmapped: bool = False) -> DescribedSource:
    """Open a checkpoint and settle its architecture, format and shape parameters from headers only.

    Shape parameters come from ``config`` when given, else from a config the checkpoint carries
    (an HF folder's config.json, a Megatron checkpoint's args), else from the tensor shapes.
    """
    from .. import spec
    from ..tensors.common import explain_skipped_dtype
    from ..tensors.open import open_source

    path = Path(path)
    source = open_source(path, config)      # a Megatron wgrads capture may need the config's --swiglu
    try:
        _refuse_unreadable_dtypes(source, allow_unmapped)
        metas = source.metas()
        framework = getattr(source, "framework", None) or CONTAINER_FRAMEWORK.get(type(source).__name__)
        model_config = spec.read_model_config(config) if config else _carried_config(path, framework)
        model_type = (model_config.hf or {}).get("model_type") if model_config else None
        arch_spec = spec.load_arch(arch or spec.detect_arch(list(metas), allow_unmatched=allow_unmapped,
                                                            model_type=model_type if isinstance(model_type, str) else None))
        candidates = spec.formats_for(arch_spec, framework) if framework and not source_format else None
        fmt = source_format or spec.detect_format(metas, arch_spec, candidates, allow_unmatched=allow_unmapped)
        given = spec.params_of(model_config) if config else _carried_params(model_config)
        return DescribedSource(source, arch_spec, fmt, given)
    except InputError as error:           # names fit no spec because a tensor was skipped for its dtype?
        source.close()
        raise explain_skipped_dtype(source, error) from None
    except BaseException:
        source.close()
        raise


def _refuse_unreadable_dtypes(source, allow_unmapped: bool) -> None:
    """A tensor whose dtype the readers do not carry is named, not silently left out of the names."""
    unreadable = {name: why for name, why in getattr(source, "skipped", {}).items() if "dtype" in why}
    if unreadable and not allow_unmapped:
        name, why = next(iter(unreadable.items()))
        where = f"{getattr(source, 'path', 'source')} [{name}]"
        raise InputError(where, f"{why}; {len(unreadable)} tensor(s) have such dtypes",
                         "cast them to fp32/fp16/bf16 first (an fp8 checkpoint must be dequantised), "
                         "or pass --allow-unmapped to leave them out")


def _carried_config(path: Path, framework: str | None):
    """The model config the checkpoint carries (an HF folder's config.json, a Megatron checkpoint's args),
    or None: none, or one that does not read (the tensor shapes then settle the sizes)."""
    from .. import spec

    carries_config = (path.is_dir() and (path / "config.json").is_file()) or framework == "megatron"
    if not carries_config:
        return None
    try:
        return spec.read_model_config(path, "hf" if framework is None else framework)
    except InputError:
        return None


def _carried_params(carried) -> dict:
    from .. import spec

    if carried is None:
        return {}
    try:
        return spec.params_of(carried)
    except InputError:
        return {}


def prepare(source_path: Path | str, options: ConvertOptions):
    """Open the source and build the plan (headers only). Returns (source, arch, source_format, params, plan)."""
    with gc_paused():     # the specs and keys.yaml parsed: objects that live on
        return _prepare(source_path, options)


def _prepare(source_path: Path | str, options: ConvertOptions):
    from .. import spec
    from ..tensors.common import explain_skipped_dtype

    described = describe_source(source_path, options.arch, options.source_format, options.config,
                                options.allow_unmapped)
    try:
        plan = spec.build_plan(described.source.metas(), described.format, options.to, described.arch,
                               described.params, target_dtype=options.dtype, pad_vocab_to=options.pad_vocab_to,
                               allow_unmapped=options.allow_unmapped)
    except InputError as error:           # a tensor missing because it was skipped for its dtype?
        described.source.close()
        raise explain_skipped_dtype(described.source, error) from None
    except BaseException:
        described.source.close()
        raise
    return described.source, described.arch, described.format, described.params, plan


def convert(source_path: Path | str, destination: Path | str, options: ConvertOptions) -> ConversionReport:
    """Stream the conversion into a staging folder beside ``destination``, verify it there, then rename it in."""
    from .destination import destination_kind, open_destination
    from .hf_folder import hf_config_for
    from .staging import Staging, check_not_a_source, source_paths

    start = time.perf_counter()
    destination = Path(destination)
    destination_kind(destination, options.to)
    source, arch, source_format, params, plan = prepare(source_path, options)
    with source:
        check_not_a_source(destination, source_paths(Path(source_path), source))
        hf = hf_config_for(plan, arch, config=options.config, source=Path(source_path),
                           framework=CONTAINER_FRAMEWORK.get(type(source).__name__)) if options.to == "hf" else None
        spans = [_byte_span(step, source) for step in plan.steps]
        aligned_to = {step.target.name: span.offset for step, span in zip(plan.steps, spans, strict=True) if span}
        with Staging(destination) as staging:
            sink = open_destination(staging.path, plan, options.to, hf.config if hf else None, aligned_to)
            try:
                written = _stream(plan, spans, source, sink, options)
                files = sink.finish()
            except BaseException:
                sink.abort()
                raise
            if options.verify:
                verify(plan, source, staging.path, {
                    "invertible": options.dtype is None and options.pad_vocab_to is None, "arch": arch,
                    "source_format": source_format, "target_format": options.to, "params": params}, destination)
            files = staging.publish(files)
    return ConversionReport(Path(source_path), destination, arch.name, source_format, options.to,
                            _params_dict(params), len(plan.steps), written, time.perf_counter() - start, files,
                            list(plan.unmapped), options.verify, list(plan.tied), hf.assumed if hf else [])


def _params_dict(params) -> dict:
    from dataclasses import asdict, is_dataclass

    return asdict(params) if is_dataclass(params) else dict(params)


def _stream(plan, spans: list, source, sink, options: ConvertOptions) -> int:
    """Write each target in plan order: a rename as its stored byte range (``spans``), the rest materialised."""
    from .progress import progress_bar

    written = 0
    with progress_bar(len(plan.steps), "converting", enabled=options.progress) as advance:
        for step, payload in _payloads(plan.steps, spans, source, options.workers):
            sink.write(step.target.name, payload)
            written += step.target.nbytes
            advance(1)
    return written


def _byte_span(step, source):
    """The source's stored byte range for a rename step (copied file to file), else None."""
    from ..spec.plan import is_byte_copy

    span = getattr(source, "span", None)
    return span(step.sources[0]) if span is not None and is_byte_copy(step) else None


def _payloads(steps, spans: list, source, workers: int):
    """Yield (step, byte span or array) in order; with workers > 1 a bounded window of arrays is computed ahead."""
    from .. import spec

    if workers <= 1:
        for step, span in zip(steps, spans, strict=True):
            yield step, span if span is not None else spec.materialize(step, source.read)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()
        for step, span in zip(steps, spans, strict=True):
            pending.append((step, span if span is not None else pool.submit(spec.materialize, step, source.read)))
            if len(pending) >= workers:
                yield _done(pending.popleft())
        while pending:
            yield _done(pending.popleft())


def _done(entry):
    step, payload = entry
    return step, payload.result() if hasattr(payload, "result") else payload


def verify(plan, source, output_path: Path, context: dict, destination: Path | None = None) -> None:
    """Re-read the output and check every tensor bit for bit against its source.

    Without a dtype cast or vocab padding the check goes backwards: the inverse plan (same spec,
    target format → source format) rebuilds each source tensor from the output. With a cast or
    padding (not invertible bit for bit) each output tensor is recomputed from its source instead.
    """
    from .. import spec
    from ..tensors.open import open_source

    destination = destination or output_path
    with open_source(output_path) as output:
        if context["invertible"]:
            inverse = spec.build_plan(output.metas(), context["target_format"], context["source_format"],
                                      context["arch"], context["params"])
            pairs = ((step.target.name, spec.materialize(step, output.read), source.read) for step in inverse.steps)
        else:
            pairs = ((step.target.name, spec.materialize(step, source.read), output.read) for step in plan.steps)
        for name, rebuilt, read in pairs:
            if not _same_bits(rebuilt, read(name)):
                raise InputError(str(destination), f"tensor {name} does not match its source after conversion",
                                 "re-run the conversion; report the tensor if it persists")


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    import numpy as np

    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and np.array_equal(a.view(np.uint8), b.view(np.uint8))
