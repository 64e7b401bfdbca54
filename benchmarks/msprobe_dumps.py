"""The msprobe dumps of the compare benchmarks (``benchmarks/compare.py``, ``benchmarks/dump_read.py``) and of the
tests that hold the fast paths to the exact ones (``tests/dump_tables.py``): a ``dump.json``, ``stack.json`` and
``construct.json`` (``step0/proc0`` or ``step0/rank{N}``) of any number of tensor rows, written entry by entry
(never the whole dict), the golden side with PyTorch naming (``Module.decoder.layers.N.self_attention.linear_qkv.
Linear.forward.0``, ``Functional.linear.K.forward``, ``torch.float32``, requires_grad), the target side with
MindSpore naming (``Cell.model.layers.N.attention.wq.Linear.forward.0``, ``Functional.matmul.K.forward``,
``Float32``), each layer following the call sequence msprobe recorded for the reference models
(tests/dump_pairs.py)."""
from __future__ import annotations

import json
import random
from pathlib import Path

LAYER_RE = "{L}"

# One decoder layer as msprobe dumped it (tests/dump_pairs.py, level mix, forward): API or module name,
# then the shapes of the tensor inputs and outputs; B/S/H/F/D: batch, sequence, hidden, ffn, head dim.
TORCH_LAYER = """
Tensor.pow BSH>BSH|Tensor.mean BSH>BS1|Tensor.__add__ BS1>BS1|Torch.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH
Tensor.__mul__ BSH,H>BSH|Module.decoder.layers.{L}.input_layernorm.RMSNorm.forward.0 BSH>BSH
Functional.linear BSH,QH>BSQ|Module.decoder.layers.{L}.self_attention.linear_qkv.Linear.forward.0 BSH>BSQ
Tensor.__mul__ BSND,S1D>BSND|Tensor.__mul__ BSND,S1D>BSND|Tensor.__add__ BSND,BSND>BSND|Torch.matmul BNSD,BNDS>BNSS
Tensor.__truediv__ BNSS>BNSS|Tensor.masked_fill BNSS,SS>BNSS|Torch.softmax BNSS>BNSS|Torch.matmul BNSS,BNSD>BNSD
Functional.linear BSH,HH>BSH|Module.decoder.layers.{L}.self_attention.linear_proj.Linear.forward.0 BSH>BSH
Module.decoder.layers.{L}.self_attention.SelfAttention.forward.0 BSH,SD,SD>BSH|Tensor.__add__ BSH,BSH>BSH
Tensor.pow BSH>BSH|Tensor.mean BSH>BS1|Tensor.__add__ BS1>BS1|Torch.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH
Tensor.__mul__ BSH,H>BSH|Module.decoder.layers.{L}.pre_mlp_layernorm.RMSNorm.forward.0 BSH>BSH
Functional.linear BSH,GH>BSG|Module.decoder.layers.{L}.mlp.linear_fc1.Linear.forward.0 BSH>BSG
Functional.silu BSF>BSF|Tensor.__mul__ BSF,BSF>BSF|Functional.linear BSF,HF>BSH
Module.decoder.layers.{L}.mlp.linear_fc2.Linear.forward.0 BSF>BSH|Module.decoder.layers.{L}.mlp.MLP.forward.0 BSH>BSH
Tensor.__add__ BSH,BSH>BSH|Module.decoder.layers.{L}.TransformerLayer.forward.0 BSH,SD,SD>BSH
"""
MINDSPORE_LAYER = """
Functional.cast BSH>BSH|Tensor.__mul__ BSH,BSH>BSH|Functional.mean BSH>BS1|Tensor.__add__ BS1>BS1
Functional.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH|Functional.cast H>H|Tensor.__mul__ BSH,H>BSH
Functional.cast BSH>BSH|Cell.model.layers.{L}.attention_norm.RMSNorm.forward.0 BSH>BSH
Functional.cast HH>HH|Functional.cast BSH>BSH|Tensor.swapaxes HH>HH|Functional.matmul BSH,HH>BSH
Cell.model.layers.{L}.attention.wq.Linear.forward.0 BSH>BSH|Functional.cast KH>KH|Functional.cast BSH>BSH
Tensor.swapaxes KH>HK|Functional.matmul BSH,HK>BSK|Cell.model.layers.{L}.attention.wk.Linear.forward.0 BSH>BSK
Functional.cast KH>KH|Functional.cast BSH>BSH|Tensor.swapaxes KH>HK|Functional.matmul BSH,HK>BSK
Cell.model.layers.{L}.attention.wv.Linear.forward.0 BSH>BSK|Tensor.reshape BSH>BSND|Tensor.reshape BSK>BSND
Tensor.reshape BSK>BSND|Tensor.transpose BSND>BNSD|Functional.cast BNSD>BNSD|Tensor.__neg__ BNSD>BNSD
Functional.cat >BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__add__ BNSD,BNSD>BNSD
Functional.cast BNSD>BNSD|Tensor.transpose BSND>BNSD|Functional.cast BNSD>BNSD|Tensor.__neg__ BNSD>BNSD
Functional.cat >BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__mul__ BNSD,SD>BNSD|Tensor.__add__ BNSD,BNSD>BNSD
Functional.cast BNSD>BNSD|Tensor.reshape BNSD>BNSD|Functional.broadcast_to BNSD>BNSD|Tensor.reshape BNSD>BNSD
Functional.cast BSND>BSND|Tensor.transpose BSND>BNSD|Tensor.reshape BNSD>BNSD|Functional.broadcast_to BNSD>BNSD
Tensor.reshape BNSD>BNSD|Tensor.swapaxes BNSD>BNDS|Functional.matmul BNSD,BNDS>BNSS|Tensor.__mul__ BNSS,>BNSS
Tensor.__add__ BNSS,SS>BNSS|Functional.cast BNSS>BNSS|Functional.softmax BNSS>BNSS|Functional.cast BNSS>BNSS
Functional.matmul BNSS,BNSD>BNSD|Tensor.transpose BNSD>BSND|Tensor.reshape BSND>BSH|Functional.cast HH>HH
Functional.cast BSH>BSH|Tensor.swapaxes HH>HH|Functional.matmul BSH,HH>BSH
Cell.model.layers.{L}.attention.wo.Linear.forward.0 BSH>BSH|Cell.model.layers.{L}.attention.Attention.forward.0 BSH>BSH
Functional.cast BSH>BSH|Tensor.__add__ BSH,BSH>BSH|Functional.cast BSH>BSH|Tensor.__mul__ BSH,BSH>BSH
Functional.mean BSH>BS1|Tensor.__add__ BS1>BS1|Functional.rsqrt BS1>BS1|Tensor.__mul__ BSH,BS1>BSH
Functional.cast H>H|Tensor.__mul__ BSH,H>BSH|Functional.cast BSH>BSH|Cell.model.layers.{L}.ffn_norm.RMSNorm.forward.0 BSH>BSH
Functional.cast FH>FH|Functional.cast BSH>BSH|Tensor.swapaxes FH>HF|Functional.matmul BSH,HF>BSF
Cell.model.layers.{L}.feed_forward.w1.Linear.forward.0 BSH>BSF|Functional.cast FH>FH|Functional.cast BSH>BSH
Tensor.swapaxes FH>HF|Functional.matmul BSH,HF>BSF|Cell.model.layers.{L}.feed_forward.w3.Linear.forward.0 BSH>BSF
Functional.silu BSF>BSF|Tensor.__mul__ BSF,BSF>BSF|Functional.cast HF>HF|Functional.cast BSF>BSF
Tensor.swapaxes HF>FH|Functional.matmul BSF,FH>BSH|Cell.model.layers.{L}.feed_forward.w2.Linear.forward.0 BSF>BSH
Cell.model.layers.{L}.feed_forward.FeedForward.forward.0 BSH>BSH|Functional.cast BSH>BSH|Tensor.__add__ BSH,BSH>BSH
Cell.model.layers.{L}.DecoderLayer.forward.0 BSH>BSH
"""
DIMS = {"B": 1, "S": 4096, "H": 4096, "F": 11008, "G": 22016, "N": 32, "D": 128, "Q": 12288, "K": 1024, "1": 1}
SIDES = {"pytorch": (TORCH_LAYER, "torch.Tensor", "torch.float32", "Module."),
         "mindspore": (MINDSPORE_LAYER, "mindspore.Tensor", "Float32", "Cell.")}


def parse_layer(text: str) -> list[tuple[str, list[list[int]], list[list[int]]]]:
    calls = []
    for item in " | ".join(text.split("\n")).split("|"):
        if not item.strip():
            continue
        name, shapes = item.split()
        inputs, outputs = shapes.split(">")
        calls.append((name, [[DIMS[c] for c in s] for s in inputs.split(",")], [[DIMS[c] for c in outputs]]))
    return calls


def tensor(kind: str, dtype: str, shape: list[int], rng: random.Random, torch: bool) -> dict:
    high = rng.uniform(0.5, 4.0)
    entry = {"type": kind, "dtype": dtype, "shape": shape, "Max": high, "Min": -rng.uniform(0.5, 4.0),
             "Mean": rng.uniform(-0.01, 0.01), "Norm": rng.uniform(10.0, 500.0)}
    if torch:
        entry["requires_grad"] = False
    return entry


def write_dump(folder: Path, framework: str, rows: int, seed: int) -> int:
    """One msprobe dump (``folder/dump.json``, ``stack.json``, ``construct.json``) of at least ``rows``
    tensor rows, written entry by entry. Returns the rows written."""
    layer_text, kind, dtype, module = SIDES[framework]
    calls, torch, rng = parse_layer(layer_text), framework == "pytorch", random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    counters: dict[str, int] = {}
    written, layer, first = 0, 0, True
    with open(folder / "dump.json", "w") as dump, open(folder / "construct.json", "w") as construct, \
            open(folder / "stack.json", "w") as stack:
        dump.write('{\n "task": "statistics",\n "level": "mix",\n "framework": "%s",\n "dump_data_dir": null,\n'
                   ' "data": {' % framework)
        construct.write("{")
        stack.write("{")
        while written < rows:
            parent = next(name for name, _, _ in reversed(calls) if name.startswith(module)).replace(LAYER_RE, str(layer))
            for name, inputs, outputs in calls:
                if name.startswith(module):
                    full = name.replace(LAYER_RE, str(layer))
                else:
                    full = f"{name}.{counters.get(name, 0)}.forward"
                    counters[name] = counters.get(name, 0) + 1
                entry = {"input_args": [tensor(kind, dtype, s, rng, torch) for s in inputs if s],
                         "input_kwargs": {}, "output": [tensor(kind, dtype, s, rng, torch) for s in outputs]}
                sep = "" if first else ","
                body = json.dumps(entry, indent=1).replace("\n", "\n  ")
                dump.write(f'{sep}\n  {json.dumps(full)}: {body}')
                construct.write(f'{sep}\n {json.dumps(full)}: {json.dumps(None if full == parent else parent)}')
                stack.write(f'{sep}\n {json.dumps(str(written))}: [[{json.dumps(full)}], '
                            f'["File model.py, line {layer}, in forward, \\n y = self.layer(x)"]]')
                first = False
                written += len(entry["input_args"]) + len(entry["output"])
            layer += 1
        dump.write("\n }\n}\n")
        construct.write("\n}\n")
        stack.write("\n}\n")
    return written
