"""One config.json reader (issue 47 item 2): dense families are entries of the same family table as the
mixture-of-experts, MLA and hybrid ones (servesim.hardware.model_config.read_config), and a dense
config gives the shape the dense reader it replaced gave, field for field.

``_dense_reader_before`` restates that reader (``names.read_hf_config`` until this change) on its own
terms: the fields it read, its Qwen2 / Qwen3 rules keyed on ``model_type``, its name rule (the
directory holding ``config.json``, else the file's stem) and its description.  Every dense
``config.json`` shipped with servesim or in the tests' fixtures is read by both and compared.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from servesim._checks import InputError
from servesim.hardware import model_config
from servesim.hardware.model_config import dense_params, read_config, supported_families
from servesim.hardware.shape import MOE_FAMILIES, ModelShape, attention_kind

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "src" / "servesim" / "data" / "model_configs"
FIXTURES = ROOT / "tests" / "fixtures" / "hf_configs"
CONFIGS = sorted(p for folder in (SHIPPED, FIXTURES) for p in folder.glob("*.json")
                 if not p.name.endswith("hf_quant_config.json"))


def _dense_reader_before(p: Path) -> ModelShape | None:
    """The shape the dense reader gave, or None where it refused the file (a mixture of experts, MLA,
    a nested text config or a bad field: not a dense config it read)."""
    data: dict[str, Any] = json.loads(p.read_text(encoding="utf-8-sig"))
    if any(data.get(k) not in (None, 0, 1) for k in ("num_experts", "num_local_experts", "n_routed_experts")):
        return None
    need = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size")
    if data.get("kv_lora_rank") is not None or not all(isinstance(data.get(k), int) and data[k] > 0
                                                       for k in need):
        return None
    hidden, heads, layers = data["hidden_size"], data["num_attention_heads"], data["num_hidden_layers"]
    kv = data.get("num_key_value_heads") or heads
    head_dim = data.get("head_dim") or hidden // heads
    tied = bool(data.get("tie_word_embeddings", False))
    model_type = data.get("model_type", "")
    o_bias = bool(data.get("attention_bias", False))
    qkv_bias = o_bias or model_type == "qwen2"
    params = dense_params(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
                          intermediate=data["intermediate_size"], vocab=data["vocab_size"],
                          tied_embeddings=tied, qkv_bias=qkv_bias, o_bias=o_bias,
                          mlp_bias=bool(data.get("mlp_bias", False)), qk_norm=model_type == "qwen3")
    hf_id = data.get("_name_or_path", "")
    if not (isinstance(hf_id, str) and re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", hf_id)):
        hf_id = ""
    name = (p.parent.name if p.name == "config.json" and p.parent.name else p.stem) or "config"
    return ModelShape(
        name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=head_dim,
        vocab=data["vocab_size"], params=float(params), active_params=float(params),
        attention=attention_kind(heads, kv), tied_embeddings=tied,
        description=f"{hf_id or name} read from {p}", hf_id=hf_id, intermediate=data["intermediate_size"],
        qkv_bias=qkv_bias, torch_dtype=data.get("torch_dtype", data.get("dtype", "")), source=str(p),
        context_length=data.get("max_position_embeddings", 0))


def test_every_dense_config_gives_the_shape_it_gave_before() -> None:
    compared = []
    for p in CONFIGS:
        before = _dense_reader_before(p)
        if before is None:
            continue
        after = read_config(p)
        assert dataclasses.asdict(after) == dataclasses.asdict(before), p.name
        compared.append(p.name)
    # the fixtures' two dense checkpoints, at their own exact counts (tests/hardware/test_names)
    assert sorted(compared) == ["llama-3.1-8b.json", "qwen3-32b.json"]
    assert read_config(FIXTURES / "llama-3.1-8b.json").params == 8_030_261_248


def test_a_dense_config_in_a_directory_and_its_qwen2_biases(tmp_path: Path) -> None:
    """The reader's name rule and the Qwen2 rule on a config the fixtures lack: a directory named for
    the model, ``_name_or_path`` an id, Q/K/V biases (Qwen2.5-7B: 7,615,616,512 parameters)."""
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
           "intermediate_size": 18944, "num_attention_heads": 28, "num_key_value_heads": 4,
           "num_hidden_layers": 28, "vocab_size": 152064, "tie_word_embeddings": False,
           "_name_or_path": "Qwen/Qwen2.5-7B-Instruct", "max_position_embeddings": 32768,
           "torch_dtype": "bfloat16"}
    path = tmp_path / "Qwen2.5-7B-Instruct" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    before, after = _dense_reader_before(path), read_config(path.parent)
    assert dataclasses.asdict(after) == dataclasses.asdict(before)
    assert (after.name, after.hf_id, after.qkv_bias, after.params) == (
        "Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", True, 7_615_616_512)


def test_one_family_table_dense_and_per_layer() -> None:
    """The table's per-layer entries are exactly the shapes' MoE / MLA / hybrid families, in order, and
    the message of an unsupported family names every entry, dense ones included."""
    table = model_config._FAMILIES
    assert tuple(k for k, fam in table.items() if fam.per_layer) == MOE_FAMILIES
    assert {k for k, fam in table.items() if not fam.per_layer} == {"llama", "mistral", "qwen2", "qwen3"}
    listed = supported_families()
    for family, entry in table.items():
        assert f"{family} ({', '.join(entry.classes)})" in listed


@pytest.mark.parametrize("name", [p.name for p in CONFIGS if p.name != "malformed.json"])
def test_every_shipped_config_reads_in_one_family(name: str) -> None:
    """Every config shipped or in the fixtures is read by one entry of the table: per-layer shapes
    carry their family, dense ones none."""
    path = next(p for p in CONFIGS if p.name == name)
    s = read_config(path)
    dense = _dense_reader_before(path) is not None
    assert (s.family == "") == dense and bool(s.layer_moe) == (not dense)


def test_the_malformed_fixture_is_refused_naming_file_and_field() -> None:
    path = FIXTURES / "malformed.json"
    with pytest.raises(InputError) as info:
        read_config(path)
    assert str(info.value) == (f"{path}: field 'hidden_size' = -1 is invalid: must be an integer in "
                               "[1, 16777216] (the model width)")
