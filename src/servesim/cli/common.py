"""What the flags shared by several command groups resolve to: the workload a ``--preset`` names, a
``--preset`` or ``--link`` from a user's ``--catalog``, the deployment and the node of ``--model``,
``--ep-comm`` as a Deployment field.  The flags themselves are declared in :mod:`servesim.cli.args`
(``add_disagg_arguments``: the workload, fleet, SLO and node flags of ``disagg``, also on plan, report and
simulate; ``add_ep_comm_argument``, also taken here by name).

On the lab's path (``servesim disagg``): the catalog, the pricer and the planners are imported inside
the functions that use them, when ``--catalog``, ``--model`` or ``--calibration`` is given."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from servesim._catalogfile import CatalogError
from servesim._checks import InputError
from servesim.cli.args import LinkName, WorkloadName, add_ep_comm_argument, engine_of
from servesim.model import kvcache, serving

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.pricer import Deployment
    from servesim.model.serving import NodeSpec, Workload

__all__ = ["add_ep_comm_argument", "deployment_of", "ep_comm_of", "preset_label", "resolve_link_name",
           "resolve_node", "workload_of"]


def ep_comm_of(args: argparse.Namespace) -> str | None:
    """``--ep-comm`` as the Deployment field (``deepep-normal`` -> ``deepep_normal``); None where not given
    (the harness's recipe or the engine's default decides)."""
    value = getattr(args, "ep_comm", None)
    return None if value is None else str(value).replace("-", "_")


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
