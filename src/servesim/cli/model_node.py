"""The node of ``--model M --gpu G`` (the measured-kernel step model's), and the dtype checks of a
model on a list of GPUs.

Imported inside :func:`servesim.cli.common.resolve_node` and ``plan --gpus`` only when a model is
named: it loads the pricer and the planners, which the lab's commands without ``--model`` never do.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from servesim.hardware.catalog import Catalog, load_catalog
from servesim.hardware.names import canonical_gpu
from servesim.hardware.node import step_node
from servesim.hardware.precision import check_dtype, check_kv_dtype
from servesim.hardware.pricer import Deployment, build_step_model, model_architecture, moe_dtype
from servesim.model.serving import NodeSpec, Workload
from servesim.plan.capacity import decode_at_load
from servesim.plan.predict import check_context

__all__ = ["check_gpu_dtypes", "model_node"]


def model_node(args: argparse.Namespace, dep: Deployment, wl: Workload) -> tuple[NodeSpec, str]:
    """The node of deployment ``dep`` (:func:`servesim.cli.common.deployment_of`: ``--model/--gpu/--tp/
    --dp/--ep/--dtype/--kv-dtype``) with ``--catalog`` and ``--nodes``, and where it came from
    (:func:`servesim.hardware.node.step_node`: its decode capacity at the largest batch within the
    workload's TPOT SLO, its TPOT_base at the batch the workload's rate keeps running on each of
    ``--nodes``)."""
    cat = load_catalog(*args.catalog)
    sm, shape, memory = build_step_model(dep, cat)
    check_context(shape, wl.prompt_tokens, wl.prompt_tokens + wl.output_tokens)
    rate = wl.rate_per_s / max(1, int(getattr(args, "nodes", 1) or 1))
    at = decode_at_load(sm, memory, rate, wl.prompt_tokens, max(1, wl.output_tokens), prefill=False)
    d = step_node(sm, memory, prompt_tokens=wl.prompt_tokens, output_tokens=wl.output_tokens,
                  tpot_slo_s=wl.slo_tpot_s, load=(rate, at.batch if at.stable else math.inf))
    return d.node, d.source


def check_gpu_dtypes(model: str, gpus: Sequence[str], dtype: str | None, kv_dtype: str,
                     catalog: Catalog | None = None) -> None:
    """Refuse ``--dtype`` and ``--kv-dtype`` on a GPU that does not run them, with predict's message
    (:func:`servesim.hardware.precision.check_dtype` for a dense model, the MoE checkpoint's format
    for a mixture-of-experts one), instead of a plan of no deployments."""
    arch = model_architecture(model)
    for g in gpus:
        if dtype is not None:
            if arch is None:
                check_dtype(dtype, g, catalog)
            else:
                moe_dtype(dtype, arch, canonical_gpu(g, catalog))
        check_kv_dtype(kv_dtype, g, catalog)
