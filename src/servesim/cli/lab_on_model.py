"""The lab's commands on a real model: ``specdec --model M --gpu G`` (the speedup by batch on the
step model ``predict`` uses) and ``disagg --model``'s prediction intervals.

:mod:`servesim.cli.lab` imports this module only when ``--model`` is given: it loads the pricer.
"""

from __future__ import annotations

import argparse
from typing import Any

from servesim.cli.args import Output, engine_of
from servesim.cli.common import deployment_of
from servesim.hardware.catalog import builtin_catalog, load_catalog
from servesim.hardware.pricer import Deployment, build_step_model
from servesim.plan.lab_model import add_disagg_intervals, specdec_on_model
from servesim.render.text import specdec_model_text

__all__ = ["specdec_model", "with_intervals"]


def with_intervals(args: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
    """``disagg --model``'s figures with their prediction intervals.  The node's step model is built
    again (with ``--catalog`` build_step_model keeps none; its kernel tables are loaded once, so this
    costs under a millisecond)."""
    sm, _, _ = build_step_model(deployment_of(args), load_catalog(*args.catalog))
    w = data["workload"]
    step = sm.decode_step(1, w["prompt_tokens"] + w["output_tokens"] / 2)
    return add_disagg_intervals(data, level=args.interval_level, engine=engine_of(args), moe=sm.is_moe,
                                fallback=not step.measured)


def specdec_model(args: argparse.Namespace) -> Output:
    """``specdec --model M --gpu G``: the preset's speedup by batch (``--model`` and ``--gpu`` checked by
    the caller)."""
    sm, _, memory = build_step_model(Deployment(args.model, args.gpu, args.tp, args.dtype, "bf16",
                                                engine_of(args)), builtin_catalog())
    data = specdec_on_model(sm, memory, preset=args.preset, context=args.context, alpha=args.alpha,
                            acceptance_length=args.acceptance_length, k=args.k, draft=args.draft,
                            traffic=args.traffic)
    rows = [{"table": "speedup_by_batch", "model": data["model"], "gpu": data["gpu"],
             "preset": data["preset"], **r} for r in data["rows"]]
    return Output(data, specdec_model_text(data), rows)
