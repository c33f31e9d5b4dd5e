"""Argument types and the command-module contract of the CLI.

Each argparse ``type=`` here rejects bad input with a message naming the
valid range; argparse adds the flag name, and :class:`Parser` prints it as one
line with exit status 2 (no usage dump, no traceback).

A command module (``servesim.cli.main`` and any module listed in
``servesim.cli.main.COMMAND_MODULES``) exposes ``register(sub)``, which adds its
subparser(s) with ``set_defaults(run=FUNC)``; ``FUNC(args)`` returns an
:class:`Output`.

The flag groups several commands share are declared here too (``add_disagg_arguments``,
``add_pool_arguments``, ...); :mod:`servesim.cli.common` resolves them.  This module and that one
are on the lab's path (``servesim all``): a type that needs the hardware layer (an engine's or a
dtype's spelling) imports it inside, when it is used.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from servesim._checks import BOUNDS, InputError
from servesim.model import kvcache
from servesim.model.kvcache import Link

__all__ = ["FORMATS", "Output", "Parser", "SubParsers", "Subcommands", "WorkloadName", "add_disagg_arguments",
           "add_engine_argument", "add_ep_comm_argument", "add_format", "add_pool_arguments", "bounded",
           "choice", "engine_name", "engine_of", "gpu_list", "integer", "link", "number", "output_dir",
           "output_file", "plot_path", "wants", "workload_name"]

FORMATS = ("table", "json", "csv")


@dataclass(frozen=True)
class Output:
    """What a command produced: the JSON data, its text table and its CSV rows."""

    data: Any
    text: str
    csv_rows: list[dict[str, Any]] = field(default_factory=list)


# argparse takes "-1" and "-.5" as values but "-inf" or "-1e3" as unknown flags; this matcher
# (the one argparse consults) admits every form float() reads, so "--d -inf" reaches the range check.
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|inf|infinity|nan)$", re.I)


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit status 2; negative numbers are values."""

    @property
    def _negative_number_matcher(self) -> re.Pattern[str]:
        return _NEGATIVE_NUMBER

    @_negative_number_matcher.setter
    def _negative_number_matcher(self, value: re.Pattern[str]) -> None:
        """argparse's own matcher (set in its ``__init__``) gives way to :data:`_NEGATIVE_NUMBER`."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time
    SubParsers = argparse._SubParsersAction


class Subcommands(SubParsers):
    """servesim's subcommands action: ``only`` names the one command a parser is built for
    (``servesim CMD`` builds CMD's alone), None where it takes every command."""

    only: str | None = None


def wants(sub: SubParsers, command: str) -> bool:
    """Whether ``register(sub)`` adds ``command``: always in the whole parser, only the command it is
    built for in a parser built for one (:class:`Subcommands`), so that a module registering several
    commands loads only the data the one being run names in its flags."""
    only = getattr(sub, "only", None)
    return only is None or only == command


def number(lo: float | None, hi: float | None, *, lo_open: bool = False, hi_open: bool = False,
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
        bad = (not math.isfinite(x) or (lo is not None and (x < lo or (lo_open and x == lo)))
               or (hi is not None and (x > hi or (hi_open and x == hi))))
        if bad:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: must be {valid}")
        return x * scale

    return parse


def integer(lo: int, why: str = "", *, hi: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= lo (and <= hi when given)."""
    valid = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"

    def parse(text: str) -> int:
        if len(text) > 40:  # int() of thousands of digits is slow or refused: out of any range here
            kind = "is out of range" if re.fullmatch(r"\s*[-+]?\d+\s*", text) else "is not an integer"
            raise argparse.ArgumentTypeError(f"{text!r} {kind}: must be {valid}{why}")
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer: must be {valid}{why}") from None
        if n < lo or (hi is not None and n > hi):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: must be {valid}{why}")
        return n

    return parse


def bounded(name: str) -> Callable[[str], float]:
    """An argparse type of the flag of ``name`` with its range in :data:`servesim._checks.BOUNDS` (the
    range the points columns, ``--compare`` fields and the API keywords of that name have too)."""
    b = BOUNDS[name]
    if b.kind == "int":
        return integer(int(b.lo if b.lo is not None else -(2**63)), hi=None if b.hi is None else int(b.hi))
    return number(b.lo, b.hi, lo_open=b.lo_open, hi_open=b.hi_open)


class LinkName(str):
    """A link name not among the shipped ones: resolved after parsing, against ``--catalog`` files."""


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.+-]*$")


def link(text: str) -> Link | LinkName:
    """A shipped link name, a bandwidth in GB/s, or (a name) a link of a user's ``--catalog``."""
    if text in kvcache.LINKS:
        return kvcache.LINKS[text]
    try:
        gbps = float(text)
    except ValueError:
        if _NAME.match(text):
            return LinkName(text)
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a known link: must be one of {', '.join(kvcache.LINKS)}, a link of a --catalog "
            "file, or a bandwidth in GB/s > 0"
        ) from None
    if not math.isfinite(gbps) or not 1e-3 <= gbps <= 1e5:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range: must be a bandwidth in GB/s in "
                                         "[0.001, 100000]")
    return Link(f"{gbps:g} GB/s", gbps * 1e9)


def choice(names: Sequence[str], what: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in names:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}: must be one of {', '.join(names)}")
        return text

    return parse


def engine_name(text: str) -> str:
    """An argparse type: an engine with a shipped profile (:data:`servesim.hardware.engines.ENGINES`)
    by its name or another spelling of it (engines.toml ``aliases``: ``tensorrt-llm``), read only when
    the flag is given, so that a lab command's parser loads no hardware module."""
    from servesim.hardware.engines import ENGINES, engine_aliases

    return engine_aliases().get(text.strip().lower()) or choice(ENGINES, "engine")(text)


def add_engine_argument(p: argparse.ArgumentParser | argparse._ArgumentGroup, help: str) -> None:
    """``--engine`` (unset: engines.toml's ``default_engine``, :func:`engine_of`)."""
    p.add_argument("--engine", type=engine_name, default=None, help=help)


def engine_of(args: argparse.Namespace) -> str:
    """The ``--engine`` given, else the engine servesim assumes (engines.toml ``default_engine``)."""
    if getattr(args, "engine", None) is not None:
        return str(args.engine)
    from servesim.hardware.engines import default_engine

    return default_engine()


ALL_DTYPES: tuple[str, ...] = ("auto", "bf16", "fp8", "fp4", "int4", "fp8_block", "mxfp4")
"""What ``--dtype`` takes where MoE models are priced: ``auto`` (a MoE checkpoint's own format), the
GEMM dtypes (:data:`servesim.hardware.precision.WEIGHT_DTYPES`) and the MoE formats."""


def dtype_choice(names: Sequence[str], what: str = "dtype") -> Callable[[str], str]:
    """:func:`choice` of a dtype as users and engines spell it (``FP8``, ``nvfp4``, ``w4a16``, ...:
    :func:`servesim.hardware.precision.normalize_dtype`)."""
    def parse(text: str) -> str:
        if text in names:  # a name as servesim spells it (every default): no pricer imported
            return text
        from servesim.hardware.precision import normalize_dtype

        key = normalize_dtype(text)
        if key not in names:
            raise argparse.ArgumentTypeError(f"unknown {what} {text!r}: must be one of {', '.join(names)}")
        return str(key)

    return parse


def interval_level(text: str) -> float:
    """``--interval-level``: a number in (0, 1)."""
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not 0.0 < x < 1.0:
        raise argparse.ArgumentTypeError(f"interval_level={text!r} is invalid: must be a level in (0, 1), "
                                         "e.g. 0.8")
    return x


def add_interval_level(p: argparse.ArgumentParser | argparse._ArgumentGroup,
                       what: str = "every figure") -> None:
    """``--interval-level``: the level of the prediction interval given with ``what``."""
    p.add_argument("--interval-level", type=interval_level, default=0.8, metavar="L",
                   help=f"level of the prediction interval given with {what} (default 0.8: 80%%), "
                        "from the out-of-sample errors of published runs (servesim/plan/interval.py)")


def add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", type=choice(FORMATS, "format"), default="table",
                   help="output format: table (default), json or csv")
    p.add_argument("-o", "--output", type=output_file, default=None, metavar="FILE",
                   help="write the output to FILE (whole or not at all) instead of standard output")


def plot_path(text: str) -> Path:
    """An argparse type: a .png or .svg file that can be written (checked before any work)."""
    p = Path(text)
    if p.suffix.lower() not in (".png", ".svg"):
        raise argparse.ArgumentTypeError(f"{text!r} is invalid: the file must end in .png or .svg")
    return _writable(text, file=True)


def output_file(text: str) -> Path:
    """An argparse type: a file the tool can write (checked before any work)."""
    return _writable(text, file=True)


def output_dir(text: str) -> Path:
    """An argparse type: a folder the tool can write into or create (checked before any work)."""
    return _writable(text, file=False)


def _writable(text: str, *, file: bool) -> Path:
    from servesim.render.output import check_dir, check_file

    try:
        return check_file(text, "path") if file else check_dir(text, "path")
    except InputError as exc:
        msg = str(exc).removeprefix("path=")  # argparse prefixes the flag
        raise argparse.ArgumentTypeError(msg) from None


def add_pool_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The shape flags of a disaggregated deployment (predict and simulate share them)."""
    p.add_argument("--prefill-tp", type=bounded("prefill_tp"), default=None,
                   help="disagg: TP of a prefill worker, 1-64 (default --tp)")
    p.add_argument("--prefill-workers", type=bounded("prefill_workers"), default=1,
                   help="disagg: prefill workers, 1-4,096 (default 1)")
    p.add_argument("--decode-tp", type=bounded("decode_tp"), default=None,
                   help="disagg: TP of a decode worker, 1-64 (default --tp)")
    p.add_argument("--decode-workers", type=bounded("decode_workers"), default=1,
                   help="disagg: decode workers, 1-4,096 (default 1)")


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
    def parse(text: str) -> str:
        if text in presets:
            return text
        if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.+-]*", text):
            return WorkloadName(text)
        raise argparse.ArgumentTypeError(f"unknown preset {text!r}: must be one of {', '.join(presets)} "
                                         "or a [workload.NAME] of a --catalog file")

    return parse
