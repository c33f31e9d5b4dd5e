"""The command line's side of launch and benchmark commands (:mod:`servesim.plan.launch`).

``plan --emit DIR`` and ``predict --emit DIR`` write each deployment's launch and benchmark scripts
(and a disaggregated row's Dynamo and llm-d files) into DIR, all of them or none; ``--format json``
carries them as ``deploy``.  ``predict --engine-command ... --bench-command ...`` (with
``--prefill-command``/``--decode-command`` for a disaggregated deployment) reads the scripts back
(:mod:`servesim.plan.launch_parse`) and predicts what they start and measure.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servesim._checks import InputError
from servesim.cli.args import LinkName, Output, link, output_dir
from servesim.render.output import write_set

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog
    from servesim.plan.search import PlanQuestion
    from servesim.sim.batching import Benchmark

__all__ = ["add_command_arguments", "add_emit_argument", "emit", "plan_deploy", "predict_deploy",
           "predict_from_commands", "wants_deploy"]


def add_emit_argument(p: argparse.ArgumentParser) -> None:
    """``--emit DIR``: the launch and benchmark scripts as files."""
    p.add_argument("--emit", type=output_dir, default=None, metavar="DIR",
                   help="write each deployment's engine launch script (vllm serve, python -m "
                   "sglang.launch_server or trtllm-serve with its LLM-API YAML), its benchmark command (the "
                   "client as predicted) and, disaggregated, a Dynamo DynamoGraphDeployment and an llm-d "
                   "values file into DIR, all of them or none (--format json carries them as deploy)")


def add_command_arguments(p: argparse.ArgumentParser) -> None:
    """predict's ``--engine-command``/``--prefill-command``/``--decode-command``/``--bench-command``."""
    g = p.add_argument_group("launch and benchmark commands (read back instead of the flags above)")
    for name, what in (
        ("engine", "a colocated replica's launch: vllm serve ..., python -m sglang.launch_server "
         "... or trtllm-serve ... (a script plan --emit wrote, or @FILE)"),
        ("prefill", "a disaggregated deployment's prefill worker launch (with --decode-command)"),
        ("decode", "a disaggregated deployment's decode worker launch (with --prefill-command)"),
        ("bench", "the benchmark client's command: vllm bench serve ..., python -m "
         "sglang.bench_serving ... or InferenceMAX's benchmark_serving.py ... (or @FILE)"),
    ):
        g.add_argument(f"--{name}-command", default=None, metavar="TEXT", help=what)


def _text(value: str) -> str:
    """A command given as text, or ``@FILE`` for a file's text."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:])
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{value}: cannot read {str(path)!r}: {exc.strerror or exc}") from None


def wants_deploy(args: argparse.Namespace) -> bool:
    """Whether the output carries ``deploy`` (``--format json`` or ``--emit``): the table and CSV
    outputs stay as they were."""
    return getattr(args, "format", "table") == "json" or getattr(args, "emit", None) is not None


def emit(args: argparse.Namespace, out: Output, sets: list[tuple[str, dict[str, Any]]]) -> Output:
    """Write the ``files`` of each (prefix, deploy) of ``sets`` into ``--emit DIR`` (names prefixed),
    all or none, and say so under the text output; ``out`` unchanged without ``--emit``."""
    if getattr(args, "emit", None) is None:
        return out

    files = {
        f"{prefix}{name}": text.encode("utf-8") for prefix, d in sets for name, text in d["files"].items()
    }
    in_way = [name for name in files if (Path(args.emit) / name).is_dir()]
    if in_way:  # a folder where a file goes would stop the renames half way: refuse before writing any
        raise InputError(f"--emit {args.emit}: {in_way[0]} there is a folder; remove it or emit into another "
                         "folder (nothing was written)")
    written = write_set(args.emit, files)
    names = sorted(written)
    shown = ", ".join(names) if len(names) <= 6 else f"{names[0]}, ..., {names[-1]}"
    line = f"wrote {len(names)} files into {args.emit}: {shown}\n"
    return Output(out.data, out.text + line, out.csv_rows)


def plan_deploy(
    args: argparse.Namespace, data: dict[str, Any], q: PlanQuestion, catalog: Catalog | None
) -> list[tuple[str, dict[str, Any]]]:
    """Each ranked row of a capacity plan with its ``deploy`` (where the output wants it), and the
    (prefix, deploy) pairs to emit."""
    if not wants_deploy(args):
        return []
    from dataclasses import replace

    from servesim.plan.launch import row_deploy

    sets = []
    for i, row in enumerate(data.get("ranked", []), 1):
        gpu = str(row.get("gpu") or q.gpu)
        d = row_deploy(row, q if gpu == q.gpu else replace(q, gpu=gpu), gpu, catalog)
        if getattr(args, "format", "table") == "json":
            row["deploy"] = d
        sets.append((f"row{i:02d}-", d))
    return sets


def predict_deploy(out: dict[str, Any], bench: Benchmark, pools: dict[str, Any], spec: dict[str, Any],
                   workers: tuple[int, int] = (1, 1), link_bytes_per_s: float = 0.0,
                   catalog: Catalog | None = None) -> None:
    """``out["deploy"]``: the launch of the deployment ``pools`` (``""`` colocated, else ``prefill`` and
    ``decode``) and the benchmark ``bench`` as predicted, speculation ``spec`` at the draft length
    the prediction ran."""
    from servesim.plan.launch import deploy_colocated, deploy_disaggregated

    kw = {k: v for k, v in spec.items()
          if k in ("spec", "tree", "draft", "alpha", "acceptance_length", "traffic")}
    k = (out.get("speculation") or {}).get("k") or out.get("speculative_k") or spec.get("k")
    if "" in pools:
        out["deploy"] = deploy_colocated(pools[""], bench, k=k, catalog=catalog, **kw).as_dict()
    else:
        out["deploy"] = deploy_disaggregated(pools["prefill"], workers[0], pools["decode"], workers[1],
                                             link_bytes_per_s, bench, k=k, catalog=catalog, **kw).as_dict()


def predict_from_commands(args: argparse.Namespace, catalog: Catalog | None) -> dict[str, Any] | None:
    """The prediction of the scripts given by ``--engine-command`` (or ``--prefill-command`` and
    ``--decode-command``) and ``--bench-command``; None when none is given."""
    given = {n: getattr(args, f"{n}_command", None) for n in ("engine", "prefill", "decode", "bench")}
    if not any(given.values()):
        return None
    from servesim.plan.launch_parse import parse_benchmark, parse_launch
    from servesim.plan.predict import predict, predict_disaggregated

    if given["bench"] is None:
        raise InputError("--bench-command is required with --engine-command (or --prefill-command and "
                         "--decode-command): the client run to predict")
    if given["engine"] is None and (given["prefill"] is None or given["decode"] is None):
        missing = "--decode-command" if given["prefill"] is not None else "--prefill-command"
        raise InputError(f"{missing} is required: a disaggregated deployment needs both pools' launches "
                         "(or give --engine-command for a colocated replica)")
    bench = parse_benchmark(_text(given["bench"]))
    hint = {"gpu": args.gpu, "model": args.model, "catalog": catalog}
    if given["engine"] is not None:
        p = parse_launch(_text(given["engine"]), **hint)
        out = predict(p.deployment, bench, catalog=catalog, **p.speculation)
        predict_deploy(out, bench, {"": p.deployment}, p.speculation, catalog=catalog)
        return out
    pre = parse_launch(_text(str(given["prefill"])), **hint)
    dec = parse_launch(_text(str(given["decode"])), **hint)

    wp = int(dec.extra.get("prefill_workers") or pre.extra.get("prefill_workers") or 1)
    wd = int(dec.extra.get("decode_workers") or pre.extra.get("decode_workers") or 1)
    ln = args.link if args.link is not None else link(dec.extra.get("link") or "rdma")
    if isinstance(ln, LinkName):  # a link the script names that servesim does not ship
        raise InputError(f"--decode-command: link {str(ln)!r} is not a shipped link: give --link")
    out = predict_disaggregated(
        pre.deployment, wp, dec.deployment, wd, ln.bytes_per_s, bench, catalog=catalog, **dec.speculation
    )
    predict_deploy(out, bench, {"prefill": pre.deployment, "decode": dec.deployment}, dec.speculation,
                   (wp, wd), ln.bytes_per_s, catalog)
    return out
