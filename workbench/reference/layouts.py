"""The fused-tensor layouts, re-exported: the one implementation lives in :mod:`workbench.spec.layouts`."""
from __future__ import annotations

from ..spec.layouts import (deinterleave_rows, fuse_gate_up, fuse_grouped_qkv, fuse_row_blocks, interleave_rows,
                            rope_halves_to_pairs, rope_pairs_to_halves, split_gate_up, split_grouped_qkv,
                            split_row_blocks)

__all__ = ["deinterleave_rows", "fuse_gate_up", "fuse_grouped_qkv", "fuse_row_blocks", "interleave_rows",
           "rope_halves_to_pairs", "rope_pairs_to_halves", "split_gate_up", "split_grouped_qkv", "split_row_blocks"]
