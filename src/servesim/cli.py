"""Command line: ``servesim specdec | disagg | all``.

A thin layer over :mod:`servesim.summary` and :mod:`servesim.render`; the only
module that prints.  Bad input gets one line on stderr naming the flag, the
value and the valid range, and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from servesim import __version__
from servesim._checks import ParameterError
from servesim.catalog import CatalogError

__all__ = ["main"]

FORMATS = ("table", "json", "csv")


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _number(lo: float | None, hi: float | None, *, lo_open: bool = False, hi_open: bool = False,
            scale: float = 1.0) -> Callable[[str], float]:
    """An argparse type: a finite float in the given range (argparse names the flag)."""
    lo_s = "" if lo is None else f"{'(' if lo_open else '['}{lo:g}"
    hi_s = "" if hi is None else f"{hi:g}{')' if hi_open else ']'}"
    if lo is not None and hi is not None:
        valid = f"a number in {lo_s}, {hi_s}"
    elif lo is not None:
        valid = f"a number {'>' if lo_open else '>='} {lo:g}"
    else:
        valid = "a finite number"

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number: must be {valid}") from None
        bad = (
            not math.isfinite(x)
            or (lo is not None and (x < lo or (lo_open and x == lo)))
            or (hi is not None and (x > hi or (hi_open and x == hi)))
        )
        if bad:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: must be {valid}")
        return x * scale

    return parse


def _integer(lo: int, why: str = "") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not an integer: must be an integer >= {lo}{why}"
            ) from None
        if n < lo:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: must be an integer >= {lo}{why}")
        return n

    return parse


def _link(text: str) -> Any:
    from servesim.kvcache import LINKS, Link

    if text in LINKS:
        return LINKS[text]
    try:
        gbps = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a known link: must be one of {', '.join(LINKS)} or a bandwidth in GB/s > 0"
        ) from None
    if not math.isfinite(gbps) or gbps <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range: must be a bandwidth in GB/s > 0")
    return Link(f"{gbps:g} GB/s", gbps * 1e9)


def _choice(names: Sequence[str], what: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in names:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}: must be one of {', '.join(names)}")
        return text

    return parse


def _add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", type=_choice(FORMATS, "format"), default="table",
                   help="output format: table (default), json or csv")


def build_parser() -> argparse.ArgumentParser:
    from servesim.serving import WORKLOAD_PRESETS
    from servesim.speculative import DEFAULT_C, DEFAULT_D, DEFAULT_K_MAX, SPECDEC_PRESETS

    parser = _Parser(prog="servesim", description="Speculative decoding and prefill/decode "
                     "disaggregation, in closed form, with the assumptions attached.")
    parser.add_argument("--version", action="version", version=f"servesim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    sp = sub.add_parser("specdec", help="speculative decoding economics: grid, presets, utilization sweep")
    sp.add_argument("--preset", type=_choice(list(SPECDEC_PRESETS), "preset"), default="mtp",
                    help=f"preset for the utilization sweep: {', '.join(SPECDEC_PRESETS)} (default mtp)")
    sp.add_argument("--util", type=_number(0.0, 1.0, hi_open=True), default=0.0,
                    help="compute utilization u in [0, 1) for the grid and your case (default 0)")
    sp.add_argument("--alpha", type=_number(0.0, 1.0), default=None,
                    help="your acceptance rate in [0, 1]: prices your case and sweeps it")
    sp.add_argument("--k", type=_integer(1), default=None, help="your draft length (default: optimal)")
    sp.add_argument("--d", type=_number(0.0, None), default=DEFAULT_D,
                    help=f"draft-cost ratio t_draft/t_target >= 0 (default {DEFAULT_D:g})")
    sp.add_argument("--c", type=_number(0.0, None), default=DEFAULT_C,
                    help=f"verify cost per extra position, in target steps, >= 0 (default {DEFAULT_C:g})")
    sp.add_argument("--k-max", type=_integer(1), default=DEFAULT_K_MAX,
                    help=f"largest k searched for the optimum (default {DEFAULT_K_MAX})")
    _add_format(sp)

    dp = sub.add_parser("disagg", help="colocated vs disaggregated serving: TTFT, TPOT, goodput, crossover")
    dp.add_argument("--preset", type=_choice(list(WORKLOAD_PRESETS), "preset"), default="chat",
                    help=f"workload: {', '.join(WORKLOAD_PRESETS)} (default chat)")
    dp.add_argument("--link", type=_link, default=None,
                    help="prefill-to-decode link: nvlink, rdma, tcp, ... or GB/s (default rdma)")
    dp.add_argument("--nodes", type=_integer(2, " (one prefill and one decode node at least)"), default=8,
                    help="fleet size N >= 2 (default 8)")
    dp.add_argument("--beta", type=_number(0.0, None), default=0.5,
                    help="chunked-prefill interference coefficient >= 0 (default 0.5)")
    dp.add_argument("--rate", type=_number(0.0, None, lo_open=True), default=None,
                    help="arrival rate in req/s > 0 (default: the preset's)")
    dp.add_argument("--slo-ttft-ms", type=_number(0.0, None, lo_open=True, scale=1e-3), default=None,
                    dest="slo_ttft_s", help="TTFT SLO in ms > 0 (default: the preset's)")
    dp.add_argument("--slo-tpot-ms", type=_number(0.0, None, lo_open=True, scale=1e-3), default=None,
                    dest="slo_tpot_s", help="TPOT SLO in ms > 0 (default: the preset's)")
    _add_format(dp)

    ap = sub.add_parser("all", help="both parts with defaults (disagg for every workload preset)")
    _add_format(ap)
    return parser


def _specdec(args: argparse.Namespace) -> dict[str, Any]:
    from servesim.summary import specdec_summary

    return specdec_summary(u=args.util, d=args.d, c=args.c, preset=args.preset,
                           alpha=args.alpha, k=args.k, k_max=args.k_max)


def _disagg(args: argparse.Namespace) -> dict[str, Any]:
    from servesim.summary import disagg_summary

    return disagg_summary(args.preset, link=args.link, nodes=args.nodes, beta=args.beta,
                          rate_per_s=args.rate, slo_ttft_s=args.slo_ttft_s, slo_tpot_s=args.slo_tpot_s)


def _render(command: str, data: dict[str, Any], fmt: str) -> str:
    from servesim import render

    if fmt == "json":
        return render.to_json(data)
    if command == "specdec":
        if fmt == "csv":
            return render.to_csv(_specdec_rows(data))
        return render.specdec_text(data)
    if command == "disagg":
        if fmt == "csv":
            return render.to_csv(_disagg_rows(data))
        return render.disagg_text(data)
    # all
    if fmt == "csv":
        rows = _specdec_rows(data["specdec"])
        for d in data["disagg"].values():
            rows += _disagg_rows(d)
        return render.to_csv(rows)
    parts = [render.specdec_text(data["specdec"])]
    parts += [render.disagg_text(d) for d in data["disagg"].values()]
    return "\n".join(parts)


def _specdec_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"table": "grid", **g} for g in s["grid"]]
    rows += [{"table": "presets", **p} for p in s["presets"]]
    rows += [{"table": "utilization_sweep", "name": s["sweep_preset"]["name"], **r}
             for r in s["utilization_sweep"]]
    if "case" in s:
        rows.append({"table": "case", **s["case"]})
    return rows


def _disagg_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"table": "disagg", "preset": s["preset"], **r,
         "crossover_link_GBps": s["crossover_link_GBps"]}
        for r in s["rows"]
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "specdec":
            data = _specdec(args)
        elif args.command == "disagg":
            data = _disagg(args)
        else:
            from servesim.serving import WORKLOAD_PRESETS
            from servesim.summary import disagg_summary, specdec_summary

            data = {
                "specdec": specdec_summary(),
                "disagg": {name: disagg_summary(name) for name in WORKLOAD_PRESETS},
            }
    except (ParameterError, CatalogError) as exc:
        print(f"servesim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(_render(args.command, data, args.format))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
