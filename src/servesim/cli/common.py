"""Flags and their resolution shared by several command groups: the workload, fleet, SLO and node
flags of ``disagg`` (also on plan, report and simulate), a ``--preset`` or ``--link`` from a
user's ``--catalog``, and the node those flags name.

On the lab's path (``servesim disagg``): the catalog, the pricer and the planners are imported inside
the functions that use them, when ``--catalog``, ``--model`` or ``--calibration`` is given."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from servesim._catalogfile import CatalogError
from servesim._checks import InputError
from servesim.cli.args import (
    LinkName,
    add_engine_argument,
    choice,
    dtype_choice,
    engine_of,
    integer,
    link,
    number,
)
from servesim.model import kvcache, serving

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.pricer import Deployment
    from servesim.model.serving import NodeSpec, Workload

__all__ = ["WorkloadName", "add_disagg_arguments", "add_ep_comm_argument", "ep_comm_of",
           "gpu_list", "preset_label", "resolve_link_name", "resolve_node", "workload_name", "workload_of"]


def add_ep_comm_argument(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--ep-comm``: how an MoE model's attention-DP ranks reach its experts
    (:data:`servesim.hardware.engines.EP_COMMS`, spelled with hyphens)."""
    p.add_argument("--ep-comm", type=choice(["allgather", "deepep", "deepep-normal"], "ep-comm"),
                   default=None,
                   help="MoE models with --dp and --ep: how the attention-DP ranks reach the experts; "
                   "allgather (every engine's default: SGLang --moe-a2a-backend none, vLLM "
                   "--all2all-backend allgather_reducescatter, TensorRT-LLM off GB200), deepep (DeepEP's "
                   "low-latency kernels in decode steps, normal ones in prefill: SGLang --moe-a2a-backend "
                   "deepep), deepep-normal (normal kernels in every step: TensorRT-LLM "
                   "TRTLLM_FORCE_ALLTOALL_METHOD=DeepEP); a pool without attention DP exchanges nothing "
                   "and ignores it; a choice, no cost")


def ep_comm_of(args: argparse.Namespace) -> str | None:
    """``--ep-comm`` as the Deployment field (``deepep-normal`` -> ``deepep_normal``); None where not given
    (the harness's recipe or the engine's default decides)."""
    value = getattr(args, "ep_comm", None)
    return None if value is None else str(value).replace("-", "_")


def gpu_list(text: str) -> list[str]:
    """``--gpu A,B,...`` of ``plan --gpus``: each GPU once, none empty (each is searched, so the cost
    grows with the list)."""
    gpus = [g.strip() for g in str(text).split(",")]
    if not all(gpus):
        raise InputError(f"--gpu {text!r}: an empty GPU name in the list; give catalog GPUs separated by "
                         "commas, e.g. --gpu h100-sxm,h200")
    twice = sorted({g for g in gpus if gpus.count(g) > 1})
    if twice:
        raise InputError(f"--gpu {text!r}: {', '.join(twice)} given more than once (each GPU of the list is "
                         "searched once)")
    return gpus


def add_disagg_arguments(p: argparse.ArgumentParser, presets: Sequence[str]) -> None:
    """The workload/fleet/SLO flags shared by disagg and the commands built on it."""
    p.add_argument("--preset", type=workload_name(presets), default="chat",
                   help=f"workload: {', '.join(presets)} or a [workload.NAME] of a --catalog file "
                   "(default chat)")
    p.add_argument("--link", type=link, default=None,
                   help="prefill-to-decode link: nvlink, rdma, tcp, ... or GB/s (default rdma)")
    p.add_argument("--nodes", type=integer(2, " (one prefill and one decode node at least)", hi=512),
                   default=8,
                   help="fleet size N, 2-512; every split is priced, so time grows about as N^2 "
                   "(512 nodes: seconds) (default 8)")
    p.add_argument("--beta", type=number(0.0, 100.0), default=None,
                   help="chunked-prefill interference coefficient in [0, 100] (default 0.5, or the "
                   "calibrated one)")
    p.add_argument("--rate", type=number(1e-6, 1e6), default=None,
                   help="arrival rate in req/s, 1e-6 to 1e6 (default: the preset's)")
    p.add_argument("--isl", type=integer(1, hi=1_000_000), default=None,
                   help="prompt tokens per request, 1-1,000,000 (default: the preset's)")
    p.add_argument("--osl", type=integer(1, hi=1_000_000), default=None,
                   help="output tokens per request, 1-1,000,000 (default: the preset's)")
    p.add_argument("--slo-ttft-ms", type=number(0.001, 3.6e6, scale=1e-3), default=None, metavar="MS",
                   dest="slo_ttft_s", help="TTFT SLO in ms, 0.001 to 3,600,000 (default: the preset's)")
    p.add_argument("--slo-tpot-ms", type=number(0.001, 60000.0, scale=1e-3), default=None, metavar="MS",
                   dest="slo_tpot_s", help="TPOT SLO in ms, 0.001 to 60,000 (default: the preset's)")
    g = p.add_argument_group("the node (default: the lab's reference node in workloads.toml)")
    g.add_argument("--model", default=None, help="derive the node from measured kernels: catalog model, "
                   "Hugging Face id or config.json, e.g. llama-3-70b (needs --gpu)")
    g.add_argument("--gpu", default=None, help="GPU for --model, e.g. h100-sxm (or h100_sxm); plan --gpus "
                   "takes a list, h100-sxm,h200, each GPU searched in turn: cost grows with the list (three "
                   "GPUs about three times one; a progress bar shows after 1 s)")
    g.add_argument("--tp", type=integer(1, hi=64), default=1,
                   help="tensor-parallel GPUs per node for --model, 1-64, dividing the heads (default 1, as "
                   "in every command)")
    g.add_argument("--dp", type=integer(1, hi=256), default=1,
                   help="MoE models: attention data-parallel ranks per node for --model, 1-256; a node spans "
                   "tp x dp GPUs (default 1; plan --gpus searches every split)")
    g.add_argument("--ep", type=integer(1, hi=256), default=1,
                   help="MoE models: expert-parallel ranks per node for --model, 1-256, dividing the experts "
                   "and tp x dp (default 1; plan --gpus searches every split)")
    g.add_argument("--dtype", type=dtype_choice(["bf16", "fp8", "fp4"], "dtype"), default=None,
                   help="weights and GEMMs for --model: bf16 (default for dense models; a mixture-of-experts "
                   "model defaults to its checkpoint's format; plan --gpus searches every dtype the GPU "
                   "runs), fp8, fp4 (B200)")
    g.add_argument("--kv-dtype", type=dtype_choice(["bf16", "fp8"], "kv-dtype"), default="bf16",
                   help="KV cache for --model: bf16 (default) or fp8; KV-transfer sizes follow")
    add_engine_argument(g, "engine whose budgets and host time price the node (default: engines.toml's "
                        "default_engine)")
    add_ep_comm_argument(g)
    g.add_argument("--catalog", action="append", default=[], metavar="FILE",
                   help="extra catalog TOML (GPUs, models, links); may be repeated")
    g.add_argument("--calibration", default=None, metavar="FILE",
                   help="use the node and beta fitted by `servesim calibrate` (its TOML output)")


class WorkloadName(str):
    """A --preset that is not shipped: resolved after parsing, against the --catalog files."""


def workload_name(presets: Sequence[str]) -> Callable[[str], str]:
    """An argparse type: a shipped workload preset, or (a name) a workload of a user's --catalog."""
    import re

    def parse(text: str) -> str:
        if text in presets:
            return text
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.+-]*", text):
            return WorkloadName(text)
        raise argparse.ArgumentTypeError(f"unknown preset {text!r}: must be one of {', '.join(presets)} "
                                         "or a [workload.NAME] of a --catalog file")

    return parse


def workload_of(args: argparse.Namespace) -> Workload:
    """The workload ``--preset`` names: shipped, or from the ``--catalog`` files (later ones win)."""
    name = args.preset
    if not isinstance(name, WorkloadName):
        return serving.WORKLOAD_PRESETS[name]
    from servesim.hardware.catalog import load_catalog

    cat = load_catalog(*getattr(args, "catalog", []))
    if str(name) not in cat.workloads:
        known = [*serving.WORKLOAD_PRESETS, *cat.workloads]
        raise InputError(f"--preset={str(name)!r} is not a known workload: must be one of "
                         f"{', '.join(known)}, or a [workload.NAME] of a --catalog file")
    return cat.workloads[str(name)]


def preset_label(args: argparse.Namespace, wl: Workload) -> str:
    """The workload's name as output shows it: the preset's, or its lengths where --isl/--osl changed
    them (a custom workload is not the preset)."""
    base = workload_of(args)
    if (wl.prompt_tokens, wl.output_tokens) == (base.prompt_tokens, base.output_tokens):
        return str(args.preset)
    return f"custom {wl.prompt_tokens}/{wl.output_tokens} tokens (rate and SLOs of {args.preset})"


def deployment_of(args: argparse.Namespace) -> Deployment:
    """The :class:`servesim.plan.predict.Deployment` of ``--model/--gpu/--tp/--dp/--ep/--dtype/--kv-dtype``
    and ``--engine``."""
    from servesim.hardware.pricer import Deployment

    return Deployment(args.model, args.gpu, args.tp, args.dtype or "auto", args.kv_dtype, engine_of(args),
                      dp=args.dp, ep=args.ep, ep_comm=ep_comm_of(args))


def resolve_node(args: argparse.Namespace, wl: Workload) -> tuple[NodeSpec, float, str]:
    """The node, beta and a one-line description of where the node came from.

    ``--calibration`` wins, then ``--model/--gpu/--tp/--dp/--ep/--dtype/--kv-dtype`` (the
    measured-kernel step model's node, :func:`servesim.hardware.node.step_node`:
    its decode capacity at the largest batch within the workload's TPOT SLO, its TPOT_base at
    the batch the workload's rate keeps running on each of ``--nodes``), then
    the lab's reference node.  ``--beta`` overrides a calibrated beta; the default is 0.5.
    """
    if args.calibration is not None:
        from servesim.inputs.calibrate import load_calibration

        node, beta = load_calibration(args.calibration)
        return node, beta if args.beta is None else args.beta, f"calibrated ({args.calibration})"
    beta = 0.5 if args.beta is None else args.beta
    if args.model is None and args.gpu is None:
        return serving.DEFAULT_NODE, beta, "reference node (workloads.toml)"
    if args.model is None or args.gpu is None:
        raise InputError("--model and --gpu go together (both name catalog entries), "
                         "e.g. --model llama-3-70b --gpu h100-sxm --tp 8")
    from servesim.cli.model_node import model_node  # the pricer, only with --model

    node, source = model_node(args, deployment_of(args), wl)
    return node, beta, source


def resolve_link_name(args: argparse.Namespace) -> None:
    """Replace a ``--link NAME`` that is not shipped by the link of that name in ``--catalog`` files."""
    name = getattr(args, "link", None)
    if not isinstance(name, LinkName):
        return
    from servesim.hardware.catalog import load_catalog

    cat = load_catalog(*getattr(args, "catalog", []))
    try:
        args.link = cat.link(str(name)).link()
    except CatalogError:
        raise InputError(
            f"--link={str(name)!r} is not a known link: must be one of {', '.join(kvcache.LINKS)}, a link of "
            "a --catalog file, or a bandwidth in GB/s > 0"
        ) from None
