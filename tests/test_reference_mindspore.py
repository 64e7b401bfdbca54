"""The MindSpore "MindFormers-style" reference model and trainer, against numpy and MindFormers' formats.

Everything here runs real MindSpore (CPU) computations. Measured on the 2-CPU dev box: fp16 compute
moves the default model's initial loss by ~3e-6 (relative) and its logits by ~3e-4 (abs; logits ~0.65),
bf16 parameter storage moves the loss by ~1e-5; a jitted default-config step takes ~25-150 ms.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")

from workbench.reference.config import (ModelConfig, PrecisionConfig, TrainConfig,  # noqa: E402
                                        synthetic_batches, with_changes)
from workbench.reference import mindformers_log as mf_log  # noqa: E402
from workbench.reference import ms_layers  # noqa: E402
from workbench.reference import ms_model as M  # noqa: E402
from workbench.reference import ms_train as T  # noqa: E402

TINY = ModelConfig(num_layers=1, hidden_size=32, num_attention_heads=4, num_kv_heads=2, ffn_hidden_size=48,
                   vocab_size=64, seq_length=16)
LOSS_LINE = re.compile(r"\{ Epoch:\[\s*(\d+)/\s*(\d+)\], step:\[\s*(\d+)/\s*(\d+)\], loss: ([\d.]+), "
                       r"per_step_time: (\d+)ms, lr: ([\d.e+-]+), overflow cond: (\w+), loss_scale: ([\d.]+), "
                       r"global_norm: \[([\d.]+)\]")


def tiny(**changes) -> ModelConfig:
    return with_changes(TINY, **changes)


def model_inputs(cfg: ModelConfig, seed: int = 0, steps: int = 1):
    return [T.input_ids_from_megatron(b["tokens"], b["labels"], b["loss_mask"])
            for b in synthetic_batches(cfg, steps, seed=seed)]


# ------------------------------------------------------------------ numpy references -------------

def np_rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def np_rope(x, base):
    """rotate-half RoPE on [..., s, d] (HF/Megatron convention)."""
    s, d = x.shape[-2:]
    freqs = np.outer(np.arange(s), 1.0 / base ** (np.arange(0, d, 2) / d))
    emb = np.concatenate([freqs, freqs], -1)
    return x * np.cos(emb) + np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1) * np.sin(emb)


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_attention(x, w, prefix, cfg):
    b, s, _ = x.shape
    n, nkv, d = cfg.num_attention_heads, cfg.num_kv_heads, cfg.head_dim

    def project(part, heads):
        y = x @ w[f"{prefix}.{part}.weight"].T + w.get(f"{prefix}.{part}.bias", 0.0)
        return y.reshape(b, s, heads, d)

    q, k, v = project("wq", n), project("wk", nkv), project("wv", nkv)
    if cfg.qk_norm:
        q = np_rms(q, w[f"{prefix}.q_norm.weight"], cfg.norm_epsilon)
        k = np_rms(k, w[f"{prefix}.k_norm.weight"], cfg.norm_epsilon)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    q, k = np_rope(q, cfg.rotary_base), np_rope(k, cfg.rotary_base)
    group = np.arange(n) // (n // nkv)                       # GQA: head j reads kv group j // rep
    scores = q @ k[:, group].swapaxes(-1, -2) / np.sqrt(d)
    scores = np.where(np.tril(np.ones((s, s))) > 0, scores, -np.inf)
    context = (np_softmax(scores) @ v[:, group]).transpose(0, 2, 1, 3).reshape(b, s, n * d)
    return context @ w[f"{prefix}.wo.weight"].T


def np_swiglu(x, w1, w2, w3):
    gate = x @ w1.T
    return (gate / (1 + np.exp(-gate)) * (x @ w3.T)) @ w2.T


def np_moe(tokens, w, prefix, cfg):
    routed = f"{prefix}.routed_experts" if cfg.shared_expert_size else prefix
    logits = tokens @ w[f"{routed}.router.dense.weight"].T
    top = np.argsort(-logits, -1, kind="stable")[:, :cfg.moe_router_topk]
    weights = np_softmax(np.take_along_axis(logits, top, -1))
    out = np.zeros_like(tokens)
    for t in range(tokens.shape[0]):
        for slot, e in enumerate(top[t]):
            out[t] += weights[t, slot] * np_swiglu(tokens[t], *(w[f"{routed}.ffn.w{i}.weight"][e] for i in (1, 2, 3)))
    if cfg.shared_expert_size:
        out += np_swiglu(tokens, *(w[f"{prefix}.shared_experts.w{i}.weight"] for i in (1, 2, 3)))
    return out


def randomized_weights(net, seed=0):
    """Initial weights with random norms/biases too (so q/k norms and biases are exercised)."""
    rng = np.random.default_rng(seed)
    weights = M.get_weights(net)
    for name, value in weights.items():
        if value.ndim == 1:
            weights[name] = rng.normal(1.0 if "norm" in name else 0.0, 0.1, value.shape).astype(np.float32)
    M.set_weights(net, weights)
    return {name: value.astype(np.float64) for name, value in weights.items()}


# ------------------------------------------------------------------ names and fused weights ------

def test_dense_names_and_shapes_follow_mindformers_legacy():
    net = M.build_model(ModelConfig(), seed=1)
    shapes = {p.name: tuple(p.shape) for p in net.get_parameters()}
    layer = "model.layers.1."
    assert shapes["model.tok_embeddings.embedding_weight"] == (128, 64)
    assert list(shapes)[1:3] == ["model.layers.0.ffn_norm.weight", "model.layers.0.attention_norm.weight"]
    assert shapes[layer + "attention.wq.weight"] == (64, 64) and shapes[layer + "attention.wk.weight"] == (32, 64)
    assert shapes[layer + "attention.wv.weight"] == (32, 64) and shapes[layer + "attention.wo.weight"] == (64, 64)
    assert shapes[layer + "feed_forward.w1.weight"] == (176, 64) == shapes[layer + "feed_forward.w3.weight"]
    assert shapes[layer + "feed_forward.w2.weight"] == (64, 176)
    assert list(shapes)[-2:] == ["model.norm_out.weight", "lm_head.weight"] and len(shapes) == 21


@pytest.mark.parametrize("changes, qkv_concat, present, absent", [
    ({"qkv_bias": True}, False, {"attention.wq.bias": (64,), "attention.wk.bias": (32,), "attention.wv.bias": (32,)},
     ["attention.wo.bias"]),
    ({"qk_norm": True}, False, {"attention.q_norm.weight": (16,), "attention.k_norm.weight": (16,)}, []),
    ({"qkv_bias": True}, True, {"attention.w_qkv.weight": (128, 64), "attention.w_qkv.bias": (128,),
                                "feed_forward.w_gate_hidden.weight": (352, 64), "feed_forward.w2.weight": (64, 176)},
     ["attention.wq.weight", "feed_forward.w1.weight", "feed_forward.w3.weight"]),
    ({"num_experts": 4}, False,
     {"feed_forward.ffn.w1.weight": (4, 176, 64), "feed_forward.ffn.w2.weight": (4, 64, 176),
      "feed_forward.ffn.w3.weight": (4, 176, 64), "feed_forward.router.dense.weight": (4, 64)},
     ["feed_forward.w1.weight"]),
    ({"num_experts": 4, "moe_ffn_hidden_size": 32, "shared_expert_size": 48}, False,
     {"feed_forward.routed_experts.ffn.w1.weight": (4, 32, 64),
      "feed_forward.routed_experts.router.dense.weight": (4, 64),
      "feed_forward.shared_experts.w1.weight": (48, 64), "feed_forward.shared_experts.w2.weight": (64, 48)},
     ["feed_forward.router.dense.weight"]),
])
def test_variant_names_and_shapes(changes, qkv_concat, present, absent):
    cfg = ModelConfig(**changes)
    net = M.build_model(cfg, seed=1, qkv_concat=qkv_concat)
    shapes = {p.name: tuple(p.shape) for p in net.get_parameters()}
    assert shapes == M.parameter_shapes(cfg, qkv_concat)
    for suffix, shape in present.items():
        assert shapes[f"model.layers.0.{suffix}"] == shape, suffix
    for suffix in absent:
        assert f"model.layers.0.{suffix}" not in shapes
    router = [p for p in net.get_parameters() if "router" in p.name]
    assert all(p.dtype == ms.float32 for p in router)


def test_fuse_weights_round_trip_and_same_logits():
    cfg = ModelConfig(qkv_bias=True)
    plain = M.build_model(cfg, seed=5)
    weights = randomized_weights(plain, seed=1)
    fused = M.fuse_weights({k: v.astype(np.float32) for k, v in weights.items()}, cfg)
    assert {k: v.shape for k, v in fused.items()} == M.parameter_shapes(cfg, qkv_concat=True)
    assert all(np.array_equal(M.unfuse_weights(fused, cfg)[k], v.astype(np.float32)) for k, v in weights.items())
    concat = M.build_model(cfg, seed=99, qkv_concat=True)
    M.set_weights(concat, fused)
    tokens = ms.Tensor(synthetic_batches(cfg, 1)[0]["tokens"], ms.int32)
    np.testing.assert_allclose(concat.logits(tokens).asnumpy(), plain.logits(tokens).asnumpy(), rtol=0, atol=1e-6)
    # the same seed gives the same network whichever layout is built
    unfused = M.unfuse_weights(M.get_weights(M.build_model(cfg, seed=5, qkv_concat=True)), cfg)
    assert all(np.array_equal(unfused[k], v) for k, v in M.get_weights(M.build_model(cfg, seed=5)).items())


# ------------------------------------------------------------------ math -------------------------

def test_attention_matches_numpy_gqa_rope_qk_norm():
    cfg = ModelConfig(qkv_bias=True, qk_norm=True)
    net = M.build_model(cfg, seed=2)
    weights = randomized_weights(net)
    x = np.random.default_rng(3).normal(size=(2, cfg.seq_length, cfg.hidden_size))
    got = net.model.layers[0].attention(ms.Tensor(x, ms.float32)).asnumpy()
    np.testing.assert_allclose(got, np_attention(x, weights, "model.layers.0.attention", cfg), rtol=1e-4, atol=1e-6)


def test_rope_is_rotate_half_not_interleaved():
    cfg = ModelConfig()
    cos, sin = ms_layers.rotary_tables(cfg.head_dim, cfg.seq_length, cfg.rotary_base)
    position = np.arange(cfg.seq_length)[:, None]
    inv = 1.0 / cfg.rotary_base ** (np.arange(0, cfg.head_dim, 2) / cfg.head_dim)
    np.testing.assert_allclose(cos, np.cos(np.concatenate([position * inv] * 2, -1)), atol=1e-6)
    np.testing.assert_allclose(sin, np.sin(np.concatenate([position * inv] * 2, -1)), atol=1e-6)
    attention = M.build_model(cfg, seed=1).model.layers[0].attention
    x = np.random.default_rng(0).normal(size=(1, 2, cfg.seq_length, cfg.head_dim))
    got = attention.apply_rotary(ms.Tensor(x, ms.float32), cfg.seq_length).asnumpy()
    np.testing.assert_allclose(got, np_rope(x, cfg.rotary_base), atol=1e-5)
    interleaved = x.copy()                                          # GPT-J pairs (x0,x1),(x2,x3)...
    even, odd = x[..., ::2], x[..., 1::2]
    angle = position * inv
    interleaved[..., ::2], interleaved[..., 1::2] = (even * np.cos(angle) - odd * np.sin(angle),
                                                     even * np.sin(angle) + odd * np.cos(angle))
    assert np.abs(got - interleaved).max() > 1e-2


def test_moe_matches_numpy_topk_softmax_and_shared_expert():
    cfg = tiny(num_experts=4, moe_router_topk=2, shared_expert_size=24)
    net = M.build_model(cfg, seed=4)
    weights = {k: v.astype(np.float64) for k, v in M.get_weights(net).items()}
    tokens = np.random.default_rng(1).normal(size=(1, 10, cfg.hidden_size))
    got = net.model.layers[0].feed_forward(ms.Tensor(tokens, ms.float32)).asnumpy()[0]
    want = np_moe(tokens[0], weights, "model.layers.0.feed_forward", cfg)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_input_ids_from_megatron_and_masked_loss_matches_hand_formula():
    cfg = ModelConfig()
    batch = synthetic_batches(cfg, 1, seed=7, masked_fraction=0.4)[0]
    ids, labels = T.input_ids_from_megatron(batch["tokens"], batch["labels"], batch["loss_mask"])
    assert ids.shape == labels.shape == (2, cfg.seq_length + 1)
    assert np.array_equal(ids[:, :-1], batch["tokens"]) and np.array_equal(ids[:, 1:], batch["labels"])
    assert np.array_equal(labels[:, 1:] == -100, batch["loss_mask"] == 0)
    net = M.build_model(cfg, seed=3)
    logits = net.logits(ms.Tensor(batch["tokens"], ms.int32)).asnumpy().astype(np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(
        -1, keepdims=True)
    ce = -np.take_along_axis(logp, batch["labels"][..., None], -1)[..., 0]
    want = (ce * batch["loss_mask"]).sum() / batch["loss_mask"].sum()
    got = float(net(ms.Tensor(ids), ms.Tensor(labels)).asnumpy())
    assert got == pytest.approx(want, rel=1e-6)
    unmasked = float(net(ms.Tensor(ids)).asnumpy())
    assert unmasked == pytest.approx(ce.mean(), rel=1e-6) and unmasked != pytest.approx(got, rel=1e-6)
    padded = M.build_model(cfg, seed=3, pad_token_id=int(batch["tokens"][0, 3]))   # MindFormers' pad mask
    pad_mask = batch["loss_mask"] * (batch["tokens"] != batch["tokens"][0, 3])
    assert float(padded(ms.Tensor(ids), ms.Tensor(labels)).asnumpy()) == pytest.approx(
        (ce * pad_mask).sum() / pad_mask.sum(), rel=1e-6)


# ------------------------------------------------------------------ optimizers -------------------

def injected_grads(trainer, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    return {name: rng.normal(0, scale, size=p.shape).astype(np.float32)
            for name, p in zip(trainer.param_names, trainer.params, strict=False)}


def clip(grads, max_norm):
    norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values()))
    coeff = max_norm / (norm + 1e-6)
    return {k: g * min(coeff, 1.0) for k, g in grads.items()}, norm


@pytest.mark.parametrize("optimizer", ["adamw", "adam_weight_decay"])
def test_optimizer_steps_match_numpy(optimizer):
    train = TrainConfig(steps=2, lr=1e-2, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8, clip_grad=1.0,
                        optimizer=optimizer)
    net = M.build_model(tiny(qkv_bias=True), seed=0)
    trainer = T.MindFormersStyleTrainer(net, train, jit=False)
    names = trainer.param_names
    assert [n.endswith(".bias") or trainer.params[i].ndim == 1 for i, n in enumerate(names)] == sorted(
        n.endswith(".bias") or trainer.params[i].ndim == 1 for i, n in enumerate(names))   # decayed group first
    params = {k: v.astype(np.float64) for k, v in M.get_weights(net).items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    lrs = train.lr_per_update("mindformers")
    for step in (1, 2):
        raw = injected_grads(trainer, seed=step, scale=0.3 * step)
        result = trainer.step(grads=raw)
        grads, norm = clip({k: g.astype(np.float64) for k, g in raw.items()}, train.clip_grad)
        assert norm > train.clip_grad and result.global_norm == pytest.approx(norm, rel=1e-6)
        assert list(result.local_norms) == list(names) and result.lr == pytest.approx(lrs[step - 1])
        assert result.local_norms[names[0]] == pytest.approx(float((raw[names[0]].astype(np.float64) ** 2).sum()),
                                                             rel=1e-6)
        for name in names:
            decay = 0.0 if name.endswith(".bias") or params[name].ndim == 1 else train.weight_decay
            g, p = grads[name], params[name]
            m[name] = train.beta1 * m[name] + (1 - train.beta1) * g
            v2[name] = train.beta2 * v2[name] + (1 - train.beta2) * g * g
            if optimizer == "adamw":     # torch AdamW: decoupled decay, bias correction
                m_hat, v_hat = m[name] / (1 - train.beta1 ** step), v2[name] / (1 - train.beta2 ** step)
                params[name] = p * (1 - result.lr * decay) - result.lr * m_hat / (np.sqrt(v_hat) + train.eps)
            else:                        # MindFormers AdamWeightDecay: no bias correction
                params[name] = p - result.lr * (m[name] / (np.sqrt(v2[name]) + train.eps) + decay * p)
    got = M.get_weights(net)
    for name in names:
        np.testing.assert_allclose(got[name], params[name], rtol=1e-5, atol=2e-7, err_msg=name)


# ------------------------------------------------------------------ logs ------------------------

def test_log_lines_parse_and_local_norm_block_round_trips(tmp_path):
    cfg = tiny()
    net = M.build_model(cfg, seed=0)
    trainer = T.MindFormersStyleTrainer(net, TrainConfig(steps=2, log_local_norms=True), jit=False)
    log = tmp_path / "mf.log"
    results = trainer.train(2, model_inputs(cfg, steps=2), log_path=log, grads_dir=tmp_path / "grads")
    text = log.read_text(encoding="utf-8")
    matches = [LOSS_LINE.search(line) for line in text.splitlines() if "{ Epoch:[" in line]
    assert len(matches) == 2 and all(matches)
    for match, result in zip(matches, results, strict=False):
        epoch, epochs, step, steps = map(int, match.group(1, 2, 3, 4))
        assert (epoch, epochs, steps, step) == (1, 1, 2, result.step)
        assert float(match.group(5)) == pytest.approx(result.loss, abs=6e-4)
        assert float(match.group(7)) == pytest.approx(result.lr, rel=1e-6)
        assert match.group(8) == "False" and match.group(9) == "1.0"
        assert float(match.group(10)) == pytest.approx(result.global_norm, rel=1e-6)
    assert re.search(r"\] - INFO -   100\.0% \|\u2588{50}\| [\d.]+ samples/s/p  0:00:00 }", text)
    blocks = text.split(" norm_size: ")[1:]
    assert len(blocks) == 2
    for block, result in zip(blocks, results, strict=False):
        sizes, values = mf_log.parse_local_norm_block(" norm_size: " + block)
        assert sizes == trainer.sizes and len(values) == len(result.local_norms)
        np.testing.assert_allclose(values, list(result.local_norms.values()), rtol=1e-6)
    saved = sorted(p.name for p in (tmp_path / "grads" / "step_2" / "grads").iterdir() if p.suffix == ".npy")
    assert saved == sorted(f"{name}.npy" for name in trainer.param_names)


def test_log_formatters_match_mindformers_text():
    message = mf_log.format_loss_message(1, 2, 2, 19, 10.63312, 1752.9, 1e-05, 1.508834)
    assert message == ("{ Epoch:[  1/  2], step:[    2/   19], loss: 10.633120, per_step_time: 1752ms, lr: 1e-05, "
                       "overflow cond: False, loss_scale: 1.0, global_norm: [1.508834]")
    assert mf_log.format_loss_message(1, 1, 3, 9, 2.0, 5, 0.001, 1.0, mean_loss=2.5).count("loss:[2.000000/2.500000]") == 1
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - mindformers\./output/log"
                    r"\[mindformers/core/callback/callback\.py:616\] - INFO - $", mf_log.line_prefix())


# ------------------------------------------------------------------ modes, determinism, precision --

def test_graph_mode_forward_equals_pynative():
    cfg = tiny(qk_norm=True, num_experts=4, shared_expert_size=16)
    net = M.build_model(cfg, seed=3)
    ids, labels = (ms.Tensor(a) for a in model_inputs(cfg)[0])
    pynative = float(net(ids, labels).asnumpy())
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        graph = float(net(ids, labels).asnumpy())
    finally:
        ms.set_context(mode=ms.PYNATIVE_MODE)
    assert graph == pytest.approx(pynative, rel=1e-6)


def test_jit_training_equals_pynative():
    cfg, train = ModelConfig(), TrainConfig(steps=4)
    batches = model_inputs(cfg, steps=4)
    jitted = T.MindFormersStyleTrainer(M.build_model(cfg, seed=1), train, jit=True)
    fast = [jitted.step(*batch) for batch in batches]
    eager = T.MindFormersStyleTrainer(M.build_model(cfg, seed=1), train, jit=False)
    for jit_result, batch in zip(fast[:2], batches, strict=False):
        eager_result = eager.step(*batch)
        assert eager_result.loss == pytest.approx(jit_result.loss, rel=1e-6)
        assert eager_result.global_norm == pytest.approx(jit_result.global_norm, rel=1e-5)


def test_two_runs_are_bit_identical():
    cfg = tiny(qkv_bias=True)
    runs = []
    for _ in range(2):
        net = M.build_model(cfg, seed=11)
        results = T.MindFormersStyleTrainer(net, TrainConfig(steps=2), jit=False).train(2, model_inputs(cfg, steps=2))
        runs.append(([r.loss for r in results], M.get_weights(net)))
    assert runs[0][0] == runs[1][0]
    assert all(np.array_equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])


def test_fp16_compute_stays_close_to_fp32():
    cfg = ModelConfig()
    ids, labels = (ms.Tensor(a) for a in model_inputs(cfg)[0])
    reference = M.build_model(cfg, seed=3)
    half = M.build_model(cfg, PrecisionConfig(compute_dtype="fp16", softmax_dtype="fp16", norm_dtype="fp16"), seed=3)
    loss32, loss16 = float(reference(ids, labels).asnumpy()), float(half(ids, labels).asnumpy())
    assert np.isfinite(loss16) and abs(loss16 - loss32) / loss32 < 1e-4          # measured ~4e-6
    tokens = ms.Tensor(synthetic_batches(cfg, 1)[0]["tokens"], ms.int32)
    assert np.abs(half.logits(tokens).asnumpy() - reference.logits(tokens).asnumpy()).max() < 3e-3  # ~5e-4


def test_bf16_storage_computes_fp32_and_trains():
    cfg = tiny()
    with pytest.warns(RuntimeWarning, match="compute_dtype=bf16 cannot compute"):
        net = M.build_model(cfg, PrecisionConfig(param_dtype="bf16", compute_dtype="bf16"), seed=2)
    assert all(p.dtype == ms.bfloat16 for p in net.get_parameters() if "router" not in p.name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                         # bf16 storage alone: no warning
        M.build_model(cfg, PrecisionConfig(param_dtype="bf16"), seed=2)
    before = M.get_weights(net)
    fp32 = M.build_model(cfg, seed=0)
    M.set_weights(fp32, before)
    ids, labels = model_inputs(cfg)[0]
    trainer = T.MindFormersStyleTrainer(net, TrainConfig(steps=1, lr=1e-3), jit=False)
    result = trainer.step(ids, labels)
    assert result.loss == pytest.approx(float(fp32(ms.Tensor(ids), ms.Tensor(labels)).asnumpy()), rel=1e-6)
    after = M.get_weights(net)
    assert all(p.dtype == ms.bfloat16 for p in net.get_parameters())
    assert not np.array_equal(before["lm_head.weight"], after["lm_head.weight"])
    # a 1e-3 step on a norm weight of 1.0 is below bf16 resolution: storage stays 1.0, the fp32 master moves
    master = dict(zip(trainer.param_names, trainer.masters, strict=False))["model.norm_out.weight"].asnumpy()
    assert np.array_equal(after["model.norm_out.weight"], before["model.norm_out.weight"])
    assert 5e-4 < np.abs(master - 1.0).max() < 2e-3


def test_moe_trains_one_step():
    cfg = tiny(num_experts=4, moe_router_topk=2, shared_expert_size=16)
    net = M.build_model(cfg, seed=6)
    before = M.get_weights(net)
    trainer = T.MindFormersStyleTrainer(net, TrainConfig(steps=1), jit=False, keep_grads=True)
    result = trainer.step(*model_inputs(cfg)[0])
    assert np.isfinite(result.loss) and result.global_norm > 0
    router = "model.layers.0.feed_forward.routed_experts.router.dense.weight"
    assert np.abs(result.grads[router]).sum() > 0
    assert not np.array_equal(before[router], M.get_weights(net)[router])
