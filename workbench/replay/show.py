"""``show_batch``: one captured micro-batch as a table, tokens and labels side by side.

Columns (fixed order): ``sample`` (row in the micro-batch), ``position``, ``token``, ``label``,
``loss_mask``, then ``position_id`` when captured, then ``token_text`` and ``label_text`` when a
Hugging Face tokenizer folder is given (each id decoded on its own; ids outside the tokenizer's
vocabulary show as ``<out of vocab>``). transformers is imported only with a tokenizer.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from .store import CaptureStore

OUT_OF_VOCAB = "<out of vocab>"


def load_tokenizer(folder: Path | str):
    """``AutoTokenizer.from_pretrained`` on a local folder only (nothing is downloaded)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(str(folder), "tokenizer folder not found" if not folder.exists() else "not a folder",
                         "pass a Hugging Face tokenizer folder (tokenizer.json / tokenizer_config.json)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InputError("--tokenizer", "transformers is not installed", 'pip install -e ".[transformers]"') from None
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as error:  # transformers raises many types for a bad folder
        raise InputError(str(folder), f"not a loadable tokenizer ({type(error).__name__}: "
                         f"{str(error).splitlines()[0][:150] if str(error) else ''})",
                         "pass a folder saved with tokenizer.save_pretrained") from None


def decoder(tokenizer):
    """A cached id → text function for ``tokenizer`` (a loaded tokenizer or a folder)."""
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(tokenizer)
    size = len(tokenizer)
    cache: dict[int, str] = {}

    def decode(token_id: int) -> str:
        if token_id not in cache:
            cache[token_id] = tokenizer.decode([token_id]) if 0 <= token_id < size else OUT_OF_VOCAB
        return cache[token_id]

    return decode


def show_batch(path, step: int, rank: int, micro_batch: int = 0, tokenizer=None, store: CaptureStore | None = None):
    """The micro-batch as a tidy DataFrame, one row per (sample, position)."""
    import pandas as pd

    store = store or CaptureStore(path)
    arrays = store.read(step, rank, micro_batch)
    tokens = arrays["tokens"]
    rows, length = (tokens.shape if tokens.ndim == 2 else (1, tokens.size))
    frame = pd.DataFrame({
        "sample": np.repeat(np.arange(rows), length),
        "position": np.tile(np.arange(length), rows),
        "token": tokens.reshape(-1),
    })
    for name, column in (("labels", "label"), ("loss_mask", "loss_mask"), ("position_ids", "position_id")):
        if name in arrays:
            values = arrays[name]
            if values.size == length and rows > 1:  # shared across the micro-batch ([1, s])
                values = np.tile(values.reshape(-1), rows)
            if values.size == frame.shape[0]:
                frame[column] = values.reshape(-1)
    if tokenizer is not None:
        decode = decoder(tokenizer)
        frame["token_text"] = [decode(int(i)) for i in frame["token"]]
        if "label" in frame:
            frame["label_text"] = [decode(int(i)) for i in frame["label"]]
    return frame
