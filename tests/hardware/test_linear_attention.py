"""Qwen3.5's hybrid layers: gated delta nets beside full attention (servesim.hardware.linear_attention)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from servesim._checks import InputError, ParameterError
from servesim.hardware.engines import engine_profile
from servesim.hardware.kernels import tables_for
from servesim.hardware.linear_attention import (
    GDN_FLOOR_S,
    GDN_MULTIPLE,
    GDNTable,
    attention_kind_tables,
    gdn_ceiling_s,
    gdn_table,
    gdn_work,
    state_bytes,
)
from servesim.hardware.model_config import find_architecture, read_config
from servesim.hardware.moe_step import MoEStepModel, Parallelism
from servesim.hardware.shape import ModelShape
from servesim.hardware.stepmodel import Chunk

DATA = Path(__file__).resolve().parents[2] / "src" / "servesim" / "data" / "model_configs"


def _arch(name: str) -> ModelShape:
    arch = find_architecture(name)
    assert arch is not None, name
    return arch


def _vision_params(hf_id: str) -> int:
    """Qwen3.5's vision tower by hand from its vision_config (not modelled by servesim): the patch
    embedding (Conv3d with bias), the learned position table, ``depth`` blocks of two LayerNorms,
    QKV and output projections and a two-layer MLP (all with biases), and the merger (LayerNorm, then
    ``4h -> 4h -> out``, biases)."""
    v = json.loads((DATA / f"{hf_id.replace('/', '--')}_config.json").read_text())["vision_config"]
    h, i, out = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]
    patch = v["in_channels"] * v["temporal_patch_size"] * v["patch_size"] ** 2 * h + h
    block = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h)
    merged = h * v["spatial_merge_size"] ** 2
    merger = 2 * h + (merged * merged + merged) + (merged * out + out)
    return patch + v["num_position_embeddings"] * h + v["depth"] * block + merger


# --------------------------------------------------------------------------- config and counts


def test_qwen35_layers_read_from_layer_types() -> None:
    a = _arch("Qwen/Qwen3.5-397B-A17B")
    assert a.family == "qwen3_5_moe" and a.layers == 60
    assert a.linear_layers == 45 and a.attention_layers == 15  # full attention every 4th layer
    assert all(a.layer_linear[i] == ((i + 1) % 4 != 0) for i in range(60))
    assert (a.linear_key_heads, a.linear_value_heads, a.linear_key_head_dim, a.linear_value_head_dim) == (
        16, 64, 128, 128)
    assert a.attn_output_gate and a.shared_expert_gate and a.ssm_state_bytes == 4  # mamba_ssm_dtype float32


def test_qwen35_parameters_by_hand() -> None:
    a = _arch("Qwen/Qwen3.5-397B-A17B")
    h, d, H, G = 4096, 256, 32, 2
    k, v = 16 * 128, 64 * 128
    parts = a.breakdown()
    assert parts["q_proj"] == 15 * h * 2 * H * d  # the output gate doubles q_proj
    assert parts["k_proj"] == parts["v_proj"] == 15 * h * G * d
    assert parts["in_proj_qkvz"] == 45 * h * (2 * k + 2 * v)
    assert parts["in_proj_ba"] == 45 * h * 2 * 64
    assert parts["out_proj"] == 45 * v * h
    assert parts["conv1d"] == 45 * (2 * k + v) * 4
    assert parts["experts"] == 60 * 512 * 3 * h * 1024
    assert parts["router"] == 60 * (h * 512 + h)  # the router and the shared expert's gate


# (hf id, property, published, tolerance, where): half a unit of the name's last digit
PUBLISHED = [
    # Qwen's 397B counts the vision tower (0.46e9, added by hand): the text model alone is 396.35e9
    ("Qwen/Qwen3.5-397B-A17B", "params+vision", 397e9, 0.5e9, "model card: 397B total"),
    ("Qwen/Qwen3.5-397B-A17B", "active_params", 17e9, 0.5e9, "model card: 17B activated"),
    # llama.cpp's GGUF of the text model reports 122.11B total (its text tensors)
    ("Qwen/Qwen3.5-122B-A10B", "params", 122.11e9, 0.005e9, "GGUF: 122.11B"),
    ("Qwen/Qwen3.5-122B-A10B", "active_params", 10e9, 0.5e9, "name: A10B"),
    ("Qwen/Qwen3.5-35B-A3B", "params+vision", 35e9, 0.5e9, "name: 35B"),
    ("Qwen/Qwen3.5-35B-A3B", "active_params", 3e9, 0.5e9, "name: A3B"),
    ("Qwen/Qwen3.5-27B", "params+vision", 27e9, 0.5e9, "name: 27B (dense)"),
]


@pytest.mark.parametrize(("hf_id", "prop", "published", "tol", "where"), PUBLISHED,
                         ids=[f"{r[0]}-{r[1]}" for r in PUBLISHED])
def test_qwen35_counts_match_the_published_ones(hf_id: str, prop: str, published: float, tol: float,
                                                 where: str) -> None:
    a = _arch(hf_id)
    value = a.params + _vision_params(hf_id) if prop == "params+vision" else getattr(a, prop)
    assert abs(value - published) <= tol, f"{hf_id} {prop} = {value:,.0f}, published {where}"


def test_state_and_kv_by_hand() -> None:
    a = _arch("Qwen/Qwen3.5-397B-A17B")
    conv = (2 * 16 * 128 + 64 * 128) // 8 * 3 * 2  # channels on one of 8 GPUs x (K - 1) x BF16
    ssm = 64 // 8 * 128 * 128  # value heads on one GPU x d_v x d_k
    assert a.state_bytes_per_request(8) == 45 * (conv + ssm * 4)  # FP32 state (mamba_ssm_dtype)
    assert a.state_bytes_per_request(8, 2) == 45 * (conv + ssm * 2)
    assert state_bytes(a, "trtllm") == 2 and state_bytes(a, "vllm") == 4
    # only the 15 full-attention layers keep KV: 2 KV heads of 256, K and V, BF16
    assert a.kv_bytes_per_token(2.0) == 15 * 2 * 2 * 256 * 2
    assert a.kv_bytes_per_token(2.0, context=100_000) == a.kv_bytes_per_token(2.0)  # no window


def test_kv_capacity_counts_full_layers_and_the_state_per_request() -> None:
    a = _arch("Qwen/Qwen3.5-397B-A17B")
    sm = MoEStepModel(a, "b200", Parallelism(8, 1, 1), engine=engine_profile("vllm", gpu="b200"))
    tokens = 2048
    per = sm.for_requests(tokens).kv_bytes_per_token_per_gpu
    kv = 15 * 2 * 1 * 256 * 2  # 2 KV heads over 8 GPUs: one replicated on each
    assert per == pytest.approx(kv + a.state_bytes_per_request(8) / tokens)
    # longer requests spread the same state thinner: more tokens fit, never fewer
    caps = [sm.for_requests(t).kv_capacity_tokens(180e9) for t in (512, 2048, 8192, 65536)]
    assert caps == sorted(caps) and caps[0] < caps[-1]


def test_refused_architectures_say_why_in_one_line(tmp_path: Path) -> None:
    v4 = tmp_path / "config.json"
    v4.write_text(json.dumps({"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
                              "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
                              "num_key_value_heads": 1, "vocab_size": 129280, "n_routed_experts": 256,
                              "num_experts_per_tok": 6, "moe_intermediate_size": 2048}))
    with pytest.raises(InputError, match="DeepSeek-V4 is not priced") as exc:
        read_config(v4)
    assert "\n" not in str(exc.value) and "hyper-connections" in str(exc.value)
    args = ["predict", "--model", str(v4), "--gpu", "h200", "--tp", "8", "--isl", "1024", "--osl", "1024",
            "--concurrency", "32"]
    r = subprocess.run([sys.executable, "-m", "servesim", *args], capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "DeepSeek-V4 is not priced" in r.stderr
    for name in ("deepseek-ai/DeepSeek-V4-Pro", "deepseek-ai/DeepSeek-V4-Flash"):
        with pytest.raises(ParameterError, match="not priced"):
            find_architecture(name)


def test_bad_layer_types_name_the_field(tmp_path: Path) -> None:
    cfg: dict[str, Any] = json.loads((DATA / "Qwen--Qwen3.5-35B-A3B_config.json").read_text())
    cfg["text_config"]["layer_types"][0] = "sliding_attention"
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="layer_types"):
        read_config(p)


# --------------------------------------------------------------------------- the operation


def _tables() -> list[tuple[str, str, GDNTable, Any]]:
    out = []
    for gpu, folder in (("h100", "h100_sxm"), ("h200", "h200_sxm"), ("b200", "b200_sxm")):
        for engine, entry in attention_kind_tables()["gpus"][folder].items():
            out.append((gpu, engine, GDNTable(folder, engine, entry), tables_for(gpu, "vllm")))
    return out


def _shaped(hk: int, hv: int, engine: str) -> tuple[ModelShape, int]:
    """Qwen3.5-397B's gated delta net with ``hk`` x ``hv`` heads on each of ``tp`` GPUs."""
    tp = 16 // hk
    a = _arch("Qwen/Qwen3.5-397B-A17B")
    return dataclasses.replace(a, linear_key_heads=hk * tp, linear_value_heads=hv * tp,
                               ssm_state_bytes=state_bytes(a, engine)), tp


def test_gdn_lies_between_its_bound_and_the_stated_multiple() -> None:
    for gpu, engine, table, peaks in _tables():
        hbm, flops = peaks.hbm_bytes_per_s, peaks.flops_per_s["bf16"]
        for key, grids in attention_kind_tables()["gpus"][table.gpu][engine]["gdn"].items():
            hk, hv = map(int, key.split("x"))
            arch, tp = _shaped(hk, hv, engine)
            for b in grids["decode"]["x"]:
                nb, fl = gdn_work(arch, tp, b, ())
                light, price = max(nb / hbm, fl / flops), table.decode_s(b, hk, hv)
                assert light <= price <= GDN_MULTIPLE * light + GDN_FLOOR_S, (gpu, engine, key, b)
            for n in grids["prefill"]["x"]:
                for s in grids["prefill"]["y"]:
                    chunks = (Chunk(s, 0, n),)
                    nb, fl = gdn_work(arch, tp, 0, chunks)
                    light, price = max(nb / hbm, fl / flops), table.prefill_s(n, s, hk, hv)
                    assert light <= price <= gdn_ceiling_s(light, chunks), (gpu, engine, key, n, s)


def test_gdn_never_cheaper_with_more_work() -> None:
    for _gpu, _engine, table, _ in _tables():
        for hk, hv in ((2, 8), (1, 4), (16, 64)):
            if not table.has(hk, hv):
                continue
            rows = [table.decode_s(b, hk, hv) for b in (1, 3, 7, 50, 300, 1000, 1500, 4000)]
            assert rows == sorted(rows)
            for n in (1, 3, 10, 100):
                seq = [table.prefill_s(n, s, hk, hv) for s in (1, 100, 1000, 5000, 30000, 60000)]
                assert seq == sorted(seq)
            for s in (10, 2000, 40000):
                cnt = [table.prefill_s(n, s, hk, hv) for n in (1, 2, 5, 40, 64, 200)]
                assert cnt == sorted(cnt)


def test_every_hybrid_step_operation_within_its_bound_and_monotone() -> None:
    a = _arch("Qwen/Qwen3.5-397B-A17B")
    sm = MoEStepModel(a, "b200", Parallelism(8, 1, 1), engine=engine_profile("vllm", gpu="b200"))
    prev = 0.0
    for batch in (1, 8, 64, 256):
        st = sm.step(batch, 4096)
        ops = {op.name: op for op in st.ops}
        gdn = ops["gated delta net"]
        assert gdn.count == 45 and ops["attention"].count == 15 and ops["qkv proj"].count == 15
        assert gdn.light_one(sm.peaks) <= gdn.priced_s <= gdn_ceiling_s(gdn.light_one(sm.peaks))
        assert st.sol_s <= st.total_s and st.total_s >= prev
        prev = st.total_s
    assert gdn_table("b200", "vllm") is not None


def test_decode_attention_grows_less_with_context_than_full_attention() -> None:
    a = _arch("Qwen/Qwen3.5-397B-A17B")
    full = dataclasses.replace(a, layer_linear=(False,) * a.layers, quantized_parts=None)  # all full
    engine = engine_profile("vllm", gpu="b200")
    hybrid = MoEStepModel(a, "b200", Parallelism(8, 1, 1), engine=engine)
    dense = MoEStepModel(full, "b200", Parallelism(8, 1, 1), engine=engine)

    def attention(sm: MoEStepModel, ctx: int) -> float:
        return sm.step(32, ctx).attention_s

    grow_hybrid = attention(hybrid, 32768) - attention(hybrid, 1024)
    grow_full = attention(dense, 32768) - attention(dense, 1024)
    assert 0 < grow_hybrid < grow_full
    # the gated delta net itself does not grow with the context: a fixed state per sequence
    gdn = [next(op.priced_s for op in hybrid.step(32, c).ops if op.name == "gated delta net")
           for c in (1024, 32768)]
    assert gdn[0] == gdn[1]


def test_the_dense_hybrid_is_priced_with_its_mlp_in_every_layer() -> None:
    a = _arch("Qwen/Qwen3.5-27B")
    assert a.family == "qwen3_5" and a.experts == 0 and a.linear_layers == 48 and a.attention_layers == 16
    assert a.breakdown()["dense_mlp"] == 64 * 3 * 5120 * 17408
    assert a.params == a.active_params  # dense: every weight active
    sm = MoEStepModel(a, "h200", Parallelism(2, 1, 1), engine=engine_profile("vllm", gpu="h200"))
    ops = {op.name: op for op in sm.step(32, 2048).ops}
    assert ops["dense mlp"].count == 64
    assert ops["gated delta net"].count == 48 and ops["attention"].count == 16
    assert not any(op.kind == "moe" for op in ops.values()) and "router" not in ops
    # two all-reduces a layer (after attention, after the MLP), as a dense model
    assert ops["all-reduce"].count == 128


@pytest.mark.parametrize("hf_id", ["Qwen/Qwen3.5-397B-A17B", "Qwen/Qwen3.5-27B"])
def test_the_mtp_module_is_one_full_attention_layer(hf_id: str) -> None:
    from servesim.hardware.speculation import draft_model_for

    a = _arch(hf_id)
    sm = MoEStepModel(a, "b200", Parallelism(8, 1, 1), engine=engine_profile("vllm", gpu="b200"))
    drafter = draft_model_for(sm, "mtp")
    one = drafter.arch
    assert one.layers == 1 and one.linear_layers == 0 and one.moe_layers == (1 if a.experts else 0)
    names = {op.name for op in drafter.step(32, 2048).ops}
    assert "attention" in names and "gated delta net" not in names
    # one layer of the target's kind costs less than the target's whole step
    assert drafter.step(32, 2048).total_s < sm.step(32, 2048).total_s
