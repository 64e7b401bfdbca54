"""Megatron derivations for the router dtype and the fused kernels (issue 12), registered in DERIVATIONS.

Facts: docs/framework-facts.md, section "Issue 12".
"""
from __future__ import annotations

from .derive import Derived, Resolver, Unknown, derivation


@derivation
def megatron_router_dtype(r: Resolver) -> Derived | Unknown:
    """No --moe-router-dtype: the router runs in the input (activation) dtype; MindSpeed-LLM's
    --router-gating-in-fp32 computes the gating linear in fp32."""
    if r.arg("router_gating_in_fp32", "bool", False):
        return Derived("fp32", r.origin("router_gating_in_fp32"), "set")
    compute = r.value("precision.compute_dtype")
    return Derived(compute, "= activation dtype (no --moe-router-dtype / --router-gating-in-fp32)", "default")
