"""Speculative decoding priced by the measured-kernel step model: d, c and k at a running batch.

The seed's cycle ``k t_draft + t_verify`` (section 2.2) with both times from
:class:`servesim.hardware.stepmodel.StepModel` at the serving batch ``B``:

* ``t_target(B)``: a plain decode step;
* ``t_verify(B, k)``: the same step verifying ``k + 1`` positions per sequence
  (``B (k + 1)`` tokens through the GEMMs), so ``c(B, k) = (t_verify / t_target - 1) / k``;
* ``t_draft(B)``: ``eagle3`` and ``eagle`` are their head (:class:`EagleHead`: one decoder
  layer at the target's width, EAGLE-3's 2h-wide QKV input, its ``fc`` fusion and its own LM
  head over ``draft_vocab_size``, read from the head's config.json given as ``--draft``, or
  derived from the target for a published head's Hugging Face id, :func:`published_heads`);
  ``medusa`` its heads (:class:`MedusaHeads`: a residual block and an LM head each, all in one
  pass); a dense target's ``mtp`` (the lab's preset) one decoder layer; a mixture-of-experts target's ``mtp``
  is its own module (``num_nextn_predict_layers``: one MLA + MoE layer and the
  shared LM head, priced by the MoE step model), refused for a model without one;
  ``small-draft`` (or ``draft``) runs the draft model (``--draft`` or the catalog's
  ``draft_model``) on the same GPUs (tp halved until its heads divide); ``ngram``
  drafts on the host (:data:`NGRAM_HOST_S` a step plus :data:`NGRAM_HOST_S_PER_SEQ`
  a sequence: vLLM's numba prompt-lookup proposer; an estimate, not a measurement).
  A model drafter's first pass runs over every token just verified (:func:`drafting_s`).
  ``d(B) = t_draft / t_target`` with ``t_draft`` the step's drafting time over ``k``.

Acceptance: the preset's alpha (the lab's illustration), or the user's ``alpha``,
or a measured *mean acceptance length* ``A`` (tokens per verify step, the bonus
token included, as vLLM's spec-decode metrics and SGLang's ``accept length``
print it) at draft length ``k``, turned into the i.i.d. alpha with ``sum_{i<=k}
alpha^i = A`` (:func:`alpha_for_acceptance_length`).

The speedup at ``B`` is ``E[n] t_target / (k t_draft + t_verify)`` with the
seed's ``E[n] = sum_{i<=k} alpha^i``: as ``B`` grows the verify GEMMs leave the
memory-bound regime and ``c`` grows, which is seed 003's batch dependence, here
from measured kernels.  :func:`turn_off_batch` finds where it stops paying.

Standard library only; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servesim._catalogfile import read_toml
from servesim._checks import ParameterError, check_int, check_real
from servesim.hardware import speculation_physics as sp
from servesim.hardware.acceptance import alpha_for_acceptance_length  # re-exported (plan.predict)
from servesim.hardware.dtypes import BYTES_PER_VALUE
from servesim.hardware.hf_config import MAX_DIM, load_json
from servesim.hardware.moe_step import MoEStepModel
from servesim.hardware.names import attention_kind, dense_shape, resolve_model
from servesim.hardware.pricer import Drafter, Pricer
from servesim.hardware.speculation_physics import TokenTree
from servesim.hardware.stepmodel import StepModel
from servesim.model import speculative  # speculative.SPECDEC_PRESETS: read on first use
from servesim.model.speculative import SPEC_METHODS

if TYPE_CHECKING:  # pragma: no cover
    from servesim.hardware.catalog import Catalog

__all__ = ["K_MAX", "METHODS", "NGRAM_HOST_S", "NGRAM_HOST_S_PER_SEQ", "Speculation",
           "alpha_for_acceptance_length", "draft_model_for", "drafter_memory", "drafting_s",
           "largest_paying_batch", "published_heads",
           "sglang_tree_for", "speculation_for", "speedup_curve", "tree_speedup", "turn_off_batch",
           "verify_s", "with_host_overhead"]

K_MAX = 8
"""Largest draft length searched when none is given."""

METHODS: tuple[str, ...] = SPEC_METHODS
"""Draft methods ``predict`` prices (the lab's four presets, a named draft model, EAGLE-1/2, n-gram):
:data:`servesim.model.speculative.SPEC_METHODS`, the one list every command takes."""

NGRAM_HOST_S = 20e-6
"""Host time of one n-gram (prompt-lookup) proposal step (estimate)."""
NGRAM_HOST_S_PER_SEQ = 2e-6
"""Host time per sequence of one n-gram proposal step (estimate)."""


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding in the engine: k drafts per step, i.i.d. acceptance alpha."""

    k: int
    alpha: float
    draft_step_s: float  # one draft step at the running batch

    @property
    def tokens_per_step(self) -> float:
        """E[n] = sum_{i=0}^{k} alpha^i (the seed's section 2.1)."""
        return sum(self.alpha**i for i in range(self.k + 1))


@dataclass(frozen=True)
class DraftStep:
    """A drafter's pass that is not an engine step (host time, a GEMM or two): its time (s)."""

    gpu_s: float


class _HostDraft:
    """An n-gram proposer: host time only (see :data:`NGRAM_HOST_S`)."""

    def decode_step(self, batch: float, context: float, positions: int = 1) -> DraftStep:
        return DraftStep(NGRAM_HOST_S + NGRAM_HOST_S_PER_SEQ * batch)


def _mtp_module(sm: MoEStepModel, method: str) -> MoEStepModel:
    """A mixture-of-experts target's own MTP module (one layer of its kind, the shared LM head)."""
    arch = sm.arch
    if method != "mtp":
        raise ParameterError("spec", method, f"mtp (its own module) or ngram for {arch.name}: draft heads "
                             "for "
                             "mixture-of-experts models are not priced yet")
    if not arch.mtp_layers:
        raise ParameterError("spec", method, f"a method {arch.name} has: it has no MTP module "
                             "(num_nextn_predict_layers is 0); use ngram or a draft model")
    # Qwen3.5's MTP layer is a full-attention layer (vLLM models/qwen3_next_mtp.py builds it with
    # layer_type "full_attention"), MoE where the target is, dense in the dense Qwen3.5-27B
    moe = bool(arch.experts)
    gdn = ("in_proj_qkvz", "in_proj_ba", "out_proj")
    parts = None if arch.quantized_parts is None else tuple(
        p for p in arch.quantized_parts if (p != "dense_mlp" or not moe) and p not in gdn)
    one = replace(arch, layers=1, layer_windows=arch.layer_windows[-1:], layer_moe=(moe,),
                  layer_linear=(False,) if arch.layer_linear else (), quantized_parts=parts)
    return MoEStepModel(one, sm.gpu, sm.par, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine,
                        tables=sm.tables)


EAGLE3_DRAFT_VOCAB = 32000
"""Vocabulary of an EAGLE-3 head's own LM head when its config is not given (``draft_vocab_size``
in the published heads' config.json: 32,000 for yuhuili/EAGLE3-LLaMA3.1-Instruct-8B and the
RedHatAI speculators Llama heads; vLLM maps it back to the target's ids with ``d2t``)."""


class EagleHead(StepModel):
    """An EAGLE or EAGLE-3 draft head on the target's GPUs, priced by the same kernel tables.

    vLLM's ``llama_eagle3.py`` / ``llama_eagle.py``: one decoder layer at the target's width and
    tensor parallelism.  EAGLE-3's QKV projection reads the token embedding beside the fused
    feature (``2 h`` inputs), its LM head covers the head's own ``draft_vocab_size`` tokens, and
    its ``fc`` (``3 h -> h``, replicated) fuses three target layers' hidden states once per
    speculative step, on every token the target verified (:meth:`first_pass_extra_s`).  EAGLE-1/2
    apply their ``fc`` (``2 h -> h``) on every pass and share the target's LM head.  ``config``
    (an EAGLE head's config.json) gives ``draft_vocab_size``, ``intermediate_size`` and heads."""

    def __init__(self, sm: StepModel, *, eagle3: bool, config: dict[str, Any] | None = None) -> None:
        s, c = sm.shape, config or {}
        vocab = int(c.get("draft_vocab_size") or (EAGLE3_DRAFT_VOCAB if eagle3 and not config else
                                                  c.get("vocab_size") or s.vocab))
        heads = int(c.get("num_attention_heads") or s.heads)
        kv_heads = int(c.get("num_key_value_heads") or s.kv_heads)
        shape = replace(s, layers=1, vocab=vocab,
                        intermediate=int(c.get("intermediate_size") or s.intermediate), heads=heads,
                        kv_heads=kv_heads, attention=attention_kind(heads, kv_heads))
        super().__init__(shape, sm.gpu, sm.tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine,
                         tables=sm.tables)
        h, d = s.hidden, shape.head_dim
        qkv_in = 2 * h if eagle3 else h
        gemms = [((self.heads + 2 * self.kv_heads) * d, qkv_in), *self._gemms[1:]]
        if not eagle3:
            gemms.append((h, 2 * h))  # EAGLE's fc on [embedding, feature], every pass
        self._gemms = tuple(gemms)
        self.eagle3 = eagle3
        self.note = ""  # how the head's shape was found, when not from its own config.json

    def first_pass_extra_s(self, tokens: float) -> float:
        """EAGLE-3's ``fc`` over the verified tokens' three hidden states (0 for EAGLE-1/2)."""
        if not self.eagle3:
            return 0.0
        h = self.shape.hidden
        return float(self.tables.gemm(self.dtype, max(1.0, tokens), h, 3 * h).ms * 1e-3)


class MedusaHeads:
    """Medusa's heads: each a residual block (``h x h``, replicated) and its own LM head (split over
    TP), all run once on the last hidden state of each sequence (vLLM ``medusa.py``): drafting ``k``
    tokens is one pass of ``k`` heads, not ``k`` sequential passes."""

    parallel_heads = True

    def __init__(self, sm: StepModel) -> None:
        self.sm = sm

    def decode_step(self, batch: float, context: float, positions: int = 1) -> DraftStep:
        """One head on ``batch`` sequences (``positions`` tokens each)."""

        s, t = self.sm.shape, self.sm.tables
        m = max(1.0, batch * positions)
        gemm = t.gemm("bf16", m, s.hidden, s.hidden).ms + t.gemm("bf16", m, s.vocab // self.sm.tp,
                                                                  s.hidden).ms
        return DraftStep(gemm * 1e-3)


def _eagle_config(path: str, target: StepModel) -> dict[str, Any]:
    """An EAGLE head's config.json, checked against the target (same hidden size)."""


    where, data = load_json(Path(path).expanduser())
    for key in ("hidden_size", "draft_vocab_size", "vocab_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads"):
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_DIM):
            raise ParameterError("draft", path, f"an EAGLE head config: {where} field {key!r} = {v!r} must "
                                 f"be an integer in [1, {MAX_DIM}]")
    if data.get("hidden_size") not in (None, target.shape.hidden):
        raise ParameterError("draft", path, f"an EAGLE head of {target.shape.name}: its hidden_size is "
                             f"{data['hidden_size']}, the target's {target.shape.hidden}")
    return data


EAGLE_HEADS_FILE = "eagle_heads.toml"
"""Published EAGLE / EAGLE-3 heads by Hugging Face id (``hardware/data/eagle_heads.toml``)."""


def published_heads() -> dict[str, dict[str, Any]]:
    """The published EAGLE and EAGLE-3 heads servesim knows, by lower-cased Hugging Face id: each
    with its ``id``, ``method``, ``target``, ``target_hidden`` and ``source`` (the data file)."""


    data = read_toml(Path(__file__).parent / "data" / EAGLE_HEADS_FILE)
    return {str(h["id"]).lower(): dict(h) for h in data["head"]}


def _published_head(sm: StepModel, method: str, draft: str) -> EagleHead:
    """A published head given by its Hugging Face id: its shape derived from the target ``sm`` (one
    decoder layer of the target's width, EAGLE-3's fc and own LM head, :class:`EagleHead`), with a
    note saying so; refused when the id is not one servesim knows (a typo, or a head whose
    config.json the user must give), drafts with another method, or was trained for a target of
    another width."""
    heads = published_heads()
    head = heads.get(draft.lower())
    if head is None:
        known = ", ".join(sorted(h["id"] for h in heads.values() if h["method"] == method))
        raise ParameterError("draft", draft, f"the path of an EAGLE head's config.json, or the Hugging Face "
                             f"id of a published {method} head servesim knows ({known}; "
                             f"hardware/data/{EAGLE_HEADS_FILE})")
    if head["method"] != method:
        raise ParameterError("draft", draft, f"a {method} head: {head['id']} is an {head['method']} head "
                             f"(use --spec {head['method']})")
    if int(head["target_hidden"]) != sm.shape.hidden:
        raise ParameterError("draft", draft, f"a head for {sm.shape.name}: {head['id']} drafts for "
                             f"{head['target']} (hidden size {head['target_hidden']}), the target's is "
                             f"{sm.shape.hidden}")
    dm = EagleHead(sm, eagle3=method == "eagle3")
    vocab = f", its own LM head over {dm.shape.vocab:,} tokens" if method == "eagle3" else ""
    dm.note = (f"draft {head['id']} (for {head['target']}): its shape derived from the target, one "
               f"decoder layer of width {sm.shape.hidden}{vocab}; give its config.json as --draft for "
               "its own")
    return dm


def draft_model_for(sm: Pricer, method: str, catalog: Catalog | None = None,
                    draft: str | None = None) -> Drafter:
    """What drafts for ``method`` on the target step model ``sm`` (see the module docstring): a step
    model whose ``decode_step(b, ctx).gpu_s`` is one draft step."""
    if method == "ngram":
        return _HostDraft()
    if draft is not None and method not in ("small-draft", "draft", "eagle", "eagle3"):
        raise ParameterError("draft", draft, f"given only with --spec draft, small-draft (a draft model) or "
                             f"eagle / eagle3 (the head's config.json), not {method}")
    if isinstance(sm, MoEStepModel):
        return _mtp_module(sm, method)
    assert isinstance(sm, StepModel)  # the two pricers the factory builds
    if method in ("eagle", "eagle3"):
        if draft is None:
            return EagleHead(sm, eagle3=method == "eagle3")
        if Path(draft).expanduser().exists():  # the user's own config.json of the head wins
            return EagleHead(sm, eagle3=method == "eagle3", config=_eagle_config(draft, sm))
        return _published_head(sm, method, draft)
    if method == "medusa":
        return MedusaHeads(sm)
    if method not in ("small-draft", "draft"):
        return StepModel(replace(sm.shape, layers=1), sm.gpu, sm.tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype,
                         engine=sm.engine, tables=sm.tables)
    draft_name = draft
    if draft_name is None:
        try:
            draft_name = resolve_model(sm.shape.name, catalog).draft_model
        except ParameterError:
            draft_name = ""
    if not draft_name:
        raise ParameterError("spec", method, f"a preset with a drafter for {sm.shape.name}: it has no "
                             "draft_model in the catalog (give predict or specdec --draft MODEL, or a "
                             "--catalog model entry with draft_model; or use mtp, eagle3 or medusa)")
    try:
        dshape = dense_shape(draft_name, catalog)
    except ParameterError as exc:
        raise ParameterError("draft", draft_name, exc.valid) from None
    if dshape.vocab != sm.shape.vocab:
        raise ParameterError("draft", draft_name, f"a model of {sm.shape.name}'s tokenizer: its vocabulary "
                             f"has {dshape.vocab} tokens, the target's {sm.shape.vocab}")
    tp = sm.tp
    while tp > 1 and (dshape.heads % tp or (dshape.kv_heads % tp and tp % dshape.kv_heads)):
        tp //= 2
    return StepModel(dshape, sm.gpu, tp, dtype=sm.dtype, kv_dtype=sm.kv_dtype, engine=sm.engine,
                     tables=sm.tables)


def speculation_for(sm: Pricer, preset: str, batch: float, context: float, *, k: int | None = None,
                    catalog: Catalog | None = None, draft: Drafter | None = None, alpha: float | None = None,
                    k_max: int = K_MAX,
                    alphas: Mapping[int, float] | None = None) -> tuple[Speculation, dict[str, float]]:
    """The speculative setting at a running ``batch``: best k (or the given one), d, c, speedup.

    ``alpha`` replaces the preset's (a user's or one fitted from telemetry); ``alphas`` instead
    gives each draft length its own (a chain's acceptance measured at each k,
    :func:`servesim.hardware.acceptance.published_alphas`), and the k searched are its keys up to
    ``k_max``; ``draft`` is the step model that drafts (default: :func:`draft_model_for` of the
    method)."""
    if preset not in METHODS:
        raise ParameterError("spec", preset, f"one of {', '.join(METHODS)}")
    if alphas is not None:
        if alpha is not None:
            raise ParameterError("alpha", alpha, "left out when each k has its own (alphas)")
        if k is not None and k not in alphas:
            raise ParameterError("k", k, f"one of the draft lengths alphas has: {sorted(alphas)}")
        if k is None and not any(kk <= k_max for kk in alphas):
            raise ParameterError("k_max", k_max,
                                 f"at least the shortest draft length alphas has, {min(alphas)}")
    elif alpha is None:
        if preset in ("eagle", "ngram"):
            raise ParameterError("spec", preset, "given with its measured acceptance (--acceptance-length A "
                                 "at --k K, or --alpha): the lab has no preset for it")
        alpha = speculative.SPECDEC_PRESETS["small-draft" if preset == "draft" else preset].alpha
    b = max(1.0, batch)
    dm = draft if draft is not None else draft_model_for(sm, preset, catalog)
    target = sm.decode_step(b, context).total_s
    t_draft = dm.decode_step(b, context).gpu_s
    ks = [k] if k is not None else (sorted(kk for kk in alphas if kk <= k_max) if alphas is not None
                                    else list(range(1, k_max + 1)))
    best: tuple[float, int, float, float, float] | None = None
    for kk in ks:
        a = alphas[kk] if alphas is not None else alpha
        assert a is not None
        verify = verify_s(sm, preset, b, context, kk + 1)
        en = sum(a**i for i in range(kk + 1))
        drafting = drafting_s(dm, b, context, kk, t_draft)
        s = en * target / (drafting + verify)
        if best is None or s > best[0]:
            best = (s, kk, verify, drafting, a)
    assert best is not None
    speedup, kk, verify, drafting, a = best
    info = {"k": kk, "alpha": a, "acceptance_length": sum(a**i for i in range(kk + 1)),
            "d": drafting / kk / target, "c": (verify / target - 1.0) / kk, "speedup_at_batch": speedup,
            "batch": b}
    return Speculation(kk, a, drafting / kk), info


def drafting_s(dm: Drafter, batch: float, context: float, k: int, step_s: float | None = None) -> float:
    """Drafting time of one speculative step of ``k`` drafts per sequence at ``batch``.

    A model drafter (EAGLE head, MTP module, draft model) first runs over every token the
    target just verified, ``k + 1`` positions per sequence, then ``k - 1`` single-token
    passes: vLLM V1's ``EagleProposer.propose`` (vllm/v1/spec_decode/eagle.py: the first
    forward over ``target_token_ids``, CUDA graphs only up to ``max_cudagraph_capture_size``
    tokens, then ``num_speculative_tokens - 1`` passes at the batch size), SGLang's
    draft-extend then ``speculative_num_steps - 1`` decode steps.  At a large batch that first
    pass is ``B (k + 1)`` tokens through the drafter, which is what turns a draft that costs
    a few percent of a step at batch 1 into a loss at 128-256.  (Its LM head is priced for
    every position, where engines take logits at the last only: a small overstatement.)
    An n-gram proposer has no forward pass: ``k`` times its host step."""
    one = dm.decode_step(batch, context).gpu_s if step_s is None else step_s
    if isinstance(dm, _HostDraft) or getattr(dm, "parallel_heads", False):
        return k * one
    extra = getattr(dm, "first_pass_extra_s", None)
    return _pass(dm, batch, context, k + 1) + (k - 1) * one + (extra(batch * (k + 1)) if extra else 0.0)


def sglang_tree_for(sm: Pricer, method: str, batch: float, context: float, *, steps: int, topk: int,
                    draft_tokens: int, alpha: float | None = None, acceptance_length: float | None = None,
                    draft: Drafter | None = None,
                    catalog: Catalog | None = None) -> tuple[Speculation, dict[str, Any]]:
    """SGLang's EAGLE tree (``--speculative-num-steps S --speculative-eagle-topk K
    --speculative-num-draft-tokens N``) at a running ``batch``, priced by the same step model.

    SGLang's ``EAGLEWorker`` (python/sglang/srt/speculative/eagle_worker.py): ``draft_forward``
    runs ``S`` draft passes, each over the ``K`` branches kept per request (``B K`` tokens),
    ``build_tree_kernel_efficient`` keeps the ``N - 1`` best nodes, the target verifies ``N``
    tokens per request, and ``forward_draft_extend_after_decode`` runs the drafter once more over
    the accepted tokens (``E[n]`` per request).  ``E[n]``: the measured accept length as given
    (SGLang prints it for the tree it ran), else the best tree of ``N - 1`` nodes and depth ``S``
    from ``alpha`` with rank r accepted with ``alpha (1 - alpha)^(r-1)``
    (:func:`servesim.hardware.speculation_physics.best_tree`).  The engine loop takes it as a
    chain of ``N - 1`` positions whose i.i.d. acceptance gives the same ``E[n]``."""
    s_ = check_int("speculative_num_steps", steps, lo=1, hi=16)
    k_ = check_int("speculative_eagle_topk", topk, lo=1, hi=16)
    n_ = check_int("speculative_num_draft_tokens", draft_tokens, lo=2, hi=1 + s_ * k_)
    if k_ == 1 and n_ != s_ + 1:
        raise ParameterError("speculative_num_draft_tokens", n_, f"{s_ + 1} with topk 1 (a chain of "
                             f"{s_} drafts and the bonus token: SGLang sets it so)")
    if acceptance_length is not None:
        en = check_real("acceptance_length", acceptance_length, lo=1.0, hi=float(s_ + 1))
        source = f"given: mean acceptance length {en:g} of the tree"
    else:
        if alpha is None:
            raise ParameterError("alpha", None, "given with a tree (--alpha, or --acceptance-length as "
                                 "SGLang prints it)")
        tree = sp.best_tree(n_ - 1, sp.rank_acceptance(alpha, k_), max_depth=s_)
        en = tree.expected_tokens
        source = f"given: alpha {alpha:g} (tree E[n] {en:.3f})"
    b = max(1.0, float(batch))
    dm = draft if draft is not None else draft_model_for(sm, method, catalog)
    target = sm.decode_step(b, context).total_s
    verify = verify_s(sm, method, b, context, n_)
    drafting = s_ * _pass(dm, b, context, k_) + _pass(dm, b, context, max(1, round(en)))
    extra = getattr(dm, "first_pass_extra_s", None)
    if extra:
        drafting += extra(b * en)
    chain_k = n_ - 1
    a_eq = alpha_for_acceptance_length(min(en, chain_k + 1.0), chain_k) if en > 1.0 else 1e-9
    spec = Speculation(chain_k, a_eq, drafting / chain_k)
    info = {"k": chain_k, "alpha": a_eq, "acceptance_length": en, "d": drafting / chain_k / target,
            "c": (verify / target - 1.0) / chain_k, "speedup_at_batch": en * target / (drafting + verify),
            "batch": b, "tree": {"steps": s_, "topk": k_, "draft_tokens": n_}, "acceptance": source}
    return spec, info


def speedup_curve(sm: Pricer, method: str, context: float, batches: list[int], *, k: int | None = None,
                  alpha: float | None = None, draft: Drafter | None = None,
                  catalog: Catalog | None = None) -> list[dict[str, float]]:
    """The speedup of the best k (or the given one) at each running batch, from the same step model:
    seed 003's curve, whose crossing of 1 is where speculation stops paying."""
    dm = draft if draft is not None else draft_model_for(sm, method, catalog)
    out = []
    for b in batches:
        _, info = speculation_for(sm, method, float(b), context, k=k, draft=dm, alpha=alpha)
        out.append({"batch": float(b), "k": info["k"], "speedup": info["speedup_at_batch"]})
    return out


def turn_off_batch(sm: Pricer, preset: str, context: float, *, batch_limit: int,
                   catalog: Catalog | None = None, draft: Drafter | None = None, alpha: float | None = None,
                   k_max: int = K_MAX, alphas: Mapping[int, float] | None = None,
                   k: int | None = None) -> int | None:
    """The largest running batch at which speculation still pays (speedup above 1): the one
    turn-off batch of a (model, GPU, method, k, acceptance, context), whichever command asks
    (``predict --spec``, ``specdec --model``, ``roofline``).  ``k`` None takes the best k at each
    batch (``k_max`` the largest), else the engine's fixed ``k``; ``alpha`` or per-k ``alphas`` as
    :func:`speculation_for` takes them.  Powers of two, then bisection (:func:`largest_paying_batch`).

    None: it pays at every batch up to ``batch_limit``; 0: it pays at no batch.
    """
    dm = draft if draft is not None else draft_model_for(sm, preset, catalog)

    def pays(b: int) -> bool:
        return speculation_for(sm, preset, b, context, draft=dm, alpha=alpha, k=k,
                               k_max=k_max, alphas=alphas)[1]["speedup_at_batch"] > 1.0

    return largest_paying_batch(pays, batch_limit)


def largest_paying_batch(pays: Callable[[int], bool], batch_limit: int) -> int | None:
    """The largest batch ``b <= batch_limit`` with ``pays(b)`` (doubling from 1, then bisection; the
    speedup falls with the batch as the verify leaves the memory-bound regime): None when it pays
    at ``batch_limit``, 0 when it pays at no batch."""
    limit = max(1, int(batch_limit))
    if not pays(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and pays(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        return None if pays(limit) else _bisect(pays, lo, limit)
    return _bisect(pays, lo, hi)


def tree_speedup(sm: Pricer, tree: TokenTree, batch: float, context: float, *, draft: Drafter,
                 method: str = "eagle3") -> float:
    """The speedup of a draft token tree (:class:`servesim.hardware.speculation_physics.TokenTree`)
    priced by the same step model as a chain: ``E[n] t_target / (sum_levels t_draft(B, n_l) +
    t_verify(B, nodes + 1))``, where level ``l`` drafts its ``n_l`` candidates per sequence in one
    forward pass of the drafter (``n_l`` positions) and the target verifies every node at once.  A
    chain (one node per level) gives :func:`speculation_for`'s figure exactly."""
    b = max(1.0, batch)
    target = sm.decode_step(b, context).total_s
    sizes = tree.level_sizes
    # the first pass over the verified tokens (as drafting_s), then one pass per level below it
    # over the previous level's candidates
    if isinstance(draft, _HostDraft):
        drafting = tree.depth * _pass(draft, b, context, 1)
    elif getattr(draft, "parallel_heads", False):  # Medusa: each level is a head, all in one pass
        drafting = sum(_pass(draft, b, context, 1) for _ in sizes)
    else:
        extra = getattr(draft, "first_pass_extra_s", None)
        drafting = _pass(draft, b, context, tree.nodes + 1) + sum(
            _pass(draft, b, context, n) for n in sizes[:-1]) + (extra(b * (tree.nodes + 1)) if extra else 0.0)
    verify = verify_s(sm, method, b, context, tree.nodes + 1)
    return float(tree.expected_tokens * target / (drafting + verify))


def drafter_memory(dm: Drafter, sm: Pricer, k: int) -> tuple[float, float]:
    """(weight bytes per GPU, KV bytes per token per GPU) the drafter ``dm`` holds beside the
    target ``sm`` at draft length ``k``: what the KV cache loses to speculation.

    vLLM loads the drafter on the target's GPUs and gives its attention layers KV-cache blocks of
    the same block table (``kv_cache_config`` groups), so a token costs the target's bytes plus
    the drafter's; SGLang's draft worker shares the token pool the same way.  A draft model: its
    own weights and every layer's KV; an EAGLE/EAGLE-3 head or the lab's one-layer MTP: one
    decoder layer (its GEMMs as priced), EAGLE-3's ``fc`` and own LM head (the target's embedding
    is shared) and one layer of KV; a mixture-of-experts target's MTP module: its
    :attr:`~servesim.hardware.shape.ModelShape.mtp_params` (its routed experts over every
    GPU, the rest over the attention TP ranks);
    Medusa: ``k`` heads of ``h x h`` and an LM head each, no KV; n-gram: nothing."""
    inner = getattr(dm, "drafter", dm)
    if isinstance(inner, _HostDraft):
        return 0.0, 0.0
    if isinstance(inner, MedusaHeads):
        s = inner.sm.shape
        return float(k * (s.hidden * s.hidden + s.vocab * s.hidden / inner.sm.tp) * 2.0), 0.0
    if isinstance(inner, MoEStepModel):
        # one MTP module: its routed experts spread over every GPU of the replica (the target's
        # expert parallel), the rest (attention, shared experts, projection) over the attention
        # TP ranks and so replicated over the DP ranks, as the target's own layers are; BF16
        arch, par = inner.arch, inner.par
        layer = arch.mtp_params / max(1, arch.mtp_layers)
        experts = arch.experts * 3 * arch.hidden * arch.moe_intermediate
        return (float((experts / par.gpus + (layer - experts) / par.tp) * 2.0),
                float(inner.kv_bytes_per_token_per_gpu))
    if isinstance(inner, StepModel):
        shape = inner.shape
        one_layer = isinstance(inner, EagleHead) or (
            isinstance(sm, StepModel) and shape.layers < sm.shape.layers and shape.params == sm.shape.params)
        if not one_layer:
            return float(inner.weight_bytes_per_gpu), float(inner.kv_bytes_per_token_per_gpu)
        per = BYTES_PER_VALUE.get(inner.dtype, 2.0)
        w = sum(n * kk for n, kk in inner._gemms) * per
        if isinstance(inner, EagleHead):
            h = shape.hidden
            w += (3 * h * h if inner.eagle3 else 0) * 2.0 + shape.vocab * h / inner.tp * 2.0
        return float(w), float(inner.kv_bytes_per_token_per_gpu)
    return 0.0, 0.0


def beside_drafter(sm: Pricer, drafter_bytes: tuple[float, float]) -> Pricer:
    """A copy of the step model ``sm`` whose KV cache makes room for a drafter's (weight bytes per
    GPU, KV bytes per token per GPU) (:func:`drafter_memory`); its pricing is ``sm``'s."""
    return sm.with_drafter(drafter_bytes)


def verify_s(sm: Pricer, method: str, batch: float, context: float, positions: int) -> float:
    """The target's verify step over ``positions`` tokens per sequence as the engine pays it.

    Where the engine keeps its overlap scheduler for ``method``
    (:meth:`servesim.hardware.engines.EngineProfile.overlaps_speculation`) the host's work hides
    behind the GPU as in a plain step, ``max(gpu, host)``; where speculation turns it off (vLLM
    for draft-model, n-gram and Medusa drafting, SGLang's default speculative worker) the step
    is ``gpu + host``, while the plain decode it is compared with keeps the overlap.

    Never less than the plain decode step of the same sequences (``total_s``), a physical bound:
    verifying reads the same weights and caches as a plain step and more tokens, while a measured
    table need not be monotone in its rows (cuBLAS runs a one-row GEMM as a GEMV that can be slower
    than a few rows: :mod:`servesim.hardware.stepmodel`), which alone would make the verify cost
    ``c`` negative and a speedup exceed the tokens a step accepts."""
    step = sm.decode_step(batch, context, positions=positions)
    engine = getattr(sm, "engine", None)
    if engine is None or engine.overlaps_speculation(method):  # (overlap off: total_s is gpu + host)
        verify = float(step.total_s)
    else:
        verify = float(step.gpu_s + step.host_s)
    return max(verify, float(sm.decode_step(batch, context).total_s)) if positions > 1 else verify


def _pass(dm: Drafter, batch: float, context: float, positions: int) -> float:
    """One forward pass of the drafter over ``positions`` tokens per sequence."""
    return float(dm.decode_step(batch, context, positions=positions).gpu_s)


class _WithHost:
    """A drafter whose every step also pays ``overhead_s`` of host time (``--draft-overhead-us``)."""

    def __init__(self, drafter: Drafter, overhead_s: float) -> None:
        self.drafter, self.overhead_s = drafter, overhead_s

    def decode_step(self, batch: float, context: float, positions: int = 1) -> DraftStep:
        step = self.drafter.decode_step(batch, context, positions)
        return DraftStep(step.gpu_s + self.overhead_s)


def with_host_overhead(drafter: Drafter, overhead_s: float) -> Drafter:
    """``drafter`` with ``overhead_s`` of host time added to each draft step (itself when 0)."""
    return drafter if overhead_s <= 0 else _WithHost(drafter, overhead_s)


def _bisect(pays: Callable[[int], bool], lo: int, hi: int) -> int:
    """Largest b in [lo, hi) with pays(b), given pays(lo) and not pays(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pays(mid):
            lo = mid
        else:
            hi = mid
    return lo
