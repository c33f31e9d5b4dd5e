"""The hardware catalogs: they load, they validate, and bad entries get clear errors."""

from __future__ import annotations

import pytest

from servesim._catalogfile import CatalogError, load_builtin
from servesim.hardware.catalog import FIELDS, builtin_catalog, load_catalog

CAT = builtin_catalog()

GOOD_GPU = 'hbm_TBps = 2.0\nbf16_TFLOPS = 400\nmemory_GiB = 48\ninterconnect_GBps = 100\n'
GOOD_MODEL = (
    'layers = 4\nhidden_size = 512\nheads = 8\nkv_heads = 2\nhead_dim = 64\nvocab_size = 1000\n'
    'params = 20e6\nattention = "gqa"\n'
)


def test_the_issue_lists_are_all_there():
    assert {"h100-sxm", "h200", "a100-80gb", "b200", "mi300x"} <= set(CAT.gpus)
    assert {"llama-3-8b", "llama-3-70b", "llama-3-405b", "mixtral-8x7b", "deepseek-v3",
            "qwen2.5-72b"} <= set(CAT.models)
    assert {"nvlink", "rdma", "ib200", "ib100", "eth25", "tcp"} <= set(CAT.links)
    assert {m.attention for m in CAT.models.values()} == {"mha", "gqa", "mqa", "mla"}
    assert CAT.model("qwen2.5-72b").attention == "gqa"
    mx = CAT.model("mixtral-8x7b")
    assert mx.active_params < mx.params and mx.experts == 8


def test_every_entry_cites_its_source():
    for fname in ("gpus.toml", "models.toml", "links.toml"):
        for kind, entries in load_builtin(fname).items():
            for name, e in entries.items():
                assert e.get("why") or e.get("source"), f"{fname}: [{kind}.{name}]"


def test_the_seeds_keys_are_kept():
    # servesim.model.kvcache reads these keys of every model and the GBps of every link
    for name, e in load_builtin("models.toml")["model"].items():
        assert {"layers", "kv_heads", "head_dim", "bytes_per_value", "why"} <= set(e), name
    links = load_builtin("links.toml")["link"]
    assert {n: e["GBps"] for n, e in links.items()} == {
        "nvlink": 400.0, "rdma": 50.0, "ib200": 25.0, "ib100": 12.5, "eth25": 3.125, "tcp": 1.25,
    }
    assert all("why" in e for e in links.values())


def test_vendor_figures_in_si_units():
    h100 = CAT.gpu("h100-sxm")
    assert h100.hbm_bytes_per_s == 3.35e12 and h100.flops_per_s == pytest.approx(989.4e12)
    assert h100.memory_bytes == pytest.approx(81559 * 2**20, rel=1e-3)  # nvidia-smi's MiB
    assert CAT.gpu("b200").flops_per_s == 2.25e15
    assert CAT.gpu("mi300x").hbm_bytes_per_s == 5.3e12


def test_links_carry_a_stated_efficiency():
    rdma = CAT.link("rdma")
    assert rdma.efficiency == 0.9 and rdma.effective_bytes_per_s == pytest.approx(45e9)
    assert rdma.link().bytes_per_s == 50e9  # the seed's convention: GBps as is
    assert CAT.link("nvlink").nominal_GBps == 450.0


def test_unknown_names_list_the_known_ones():
    with pytest.raises(CatalogError, match=r"unknown GPU 'h300'.*h100-sxm"):
        CAT.gpu("h300")
    with pytest.raises(CatalogError, match=r"unknown model 'gpt-5'.*--catalog FILE"):
        CAT.model("gpt-5")


def test_a_user_file_adds_and_replaces(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(f'[gpu.l40s]\n{GOOD_GPU}\n[model.tiny]\n{GOOD_MODEL}\n'
                 '[link.ib400]\nGBps = 50\nefficiency = 0.95\n'
                 f'[gpu.h100-sxm]\n{GOOD_GPU}')
    cat = load_catalog(f)
    assert cat.gpu("l40s").memory_bytes == 48 * 2**30
    assert cat.model("tiny").active_params == 20e6  # defaults to params
    assert cat.link("ib400").nominal_GBps == 50
    assert cat.gpu("h100-sxm").hbm_bytes_per_s == 2e12  # replaced
    assert "llama-3-70b" in cat.models  # shipped entries stay


def _error(tmp_path, text):
    f = tmp_path / "user.toml"
    f.write_text(text)
    with pytest.raises(CatalogError) as info:
        load_catalog(f)
    msg = str(info.value)
    assert "\n" not in msg
    return msg, str(f)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"[gpu.x]\n{GOOD_GPU}hbm_tbps = 3\n",
         "[gpu.x] unknown field 'hbm_tbps' (known fields: hbm_TBps"),
        ("[gpu.x]\nhbm_TBps = 3.35\n",
         "[gpu.x] missing required field 'bf16_TFLOPS' (dense BF16"),
        (GOOD_GPU.replace("hbm_TBps = 2.0", "[gpu.x]\nhbm_TBps = 0"),
         "[gpu.x] field 'hbm_TBps': hbm_TBps=0 is invalid: must be > 0"),
        (f"[model.m]\n{GOOD_MODEL.replace('layers = 4', 'layers = 2.5')}",
         "[model.m] field 'layers': layers=2.5 is invalid: must be an integer >= 1"),
        (f"[model.m]\n{GOOD_MODEL.replace('gqa', 'sparse')}",
         "[model.m] field 'attention': attention='sparse' is invalid: must be one of 'mha'"),
        (f"[model.m]\n{GOOD_MODEL.replace('gqa', 'mha')}",
         "[model.m] field 'kv_heads': kv_heads=2 is invalid: must be equal to heads (8)"),
        (f"[model.m]\n{GOOD_MODEL}tied_embeddings = 1\n",
         "[model.m] field 'tied_embeddings': tied_embeddings=1 is invalid: must be true or false"),
        (f"[model.m]\n{GOOD_MODEL}draft_model = \"nope\"\n",
         "[model.m] field 'draft_model': unknown model 'nope'"),
        (f"[model.m]\n{GOOD_MODEL.replace('gqa', 'mla')}kv_lora_rank = 512\nqk_rope_head_dim = 64\n"
         "qk_nope_head_dim = 128\nv_head_dim = 128\n",
         "[model.m] field 'head_dim': head_dim=64 is invalid: must be such that 2 x kv_heads x head_dim"),
        ("[link.slow]\nGBps = 1\nefficiency = 1.5\n",
         "[link.slow] field 'efficiency': efficiency=1.5 is invalid: must be in (0, 1]"),
        ("[gpus.x]\nhbm_TBps = 1\n", "unknown table 'gpus'"),
        ("[gpu]\nx = 3\n", "[gpu.x] must be a table of fields, got 3"),
    ],
)
def test_bad_entries_name_file_entry_and_field(tmp_path, text, expected):
    msg, path = _error(tmp_path, text)
    assert msg.startswith(f"{path}: ")
    assert expected in msg


def test_bad_files(tmp_path):
    msg, path = _error(tmp_path, "[gpu.x\nhbm = ")
    assert msg.startswith(f"catalog file {path!r}: not valid TOML")
    with pytest.raises(CatalogError, match="No such file"):
        load_catalog(tmp_path / "missing.toml")


def test_every_shipped_field_is_declared():
    for fname, kind in (("gpus.toml", "gpu"), ("models.toml", "model"), ("links.toml", "link")):
        for entry in load_builtin(fname)[kind].values():
            assert set(entry) <= set(FIELDS[kind])


def test_user_workloads(tmp_path):
    """[workload.NAME] in a user catalog: read, checked, and usable as --preset everywhere."""
    from servesim.hardware.catalog import load_catalog
    from tests.cli_helpers import run_cli

    f = tmp_path / "wl.toml"
    f.write_text('[workload.summarize]\nprompt_tokens = 8000\noutput_tokens = 300\nrate_per_s = 1.5\n'
                 'slo_ttft_s = 3.0\nslo_tpot_s = 0.04\n')
    wl = load_catalog(f).workloads["summarize"]
    assert (wl.prompt_tokens, wl.output_tokens, wl.rate_per_s) == (8000, 300, 1.5)
    res = run_cli("disagg", "--preset", "summarize", "--catalog", str(f), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert '"prompt_tokens": 8000' in res.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("[workload.x]\nprompt_tokens = 0\noutput_tokens = 1\nrate_per_s = 1\nslo_ttft_s = 1\n"
                   "slo_tpot_s = 1\n")
    res = run_cli("disagg", "--preset", "x", "--catalog", str(bad))
    assert res.returncode == 2 and "[workload.x] field 'prompt_tokens'" in res.stderr
    res = run_cli("disagg", "--preset", "nope")
    assert res.returncode == 2 and "'nope'" in res.stderr and "chat" in res.stderr
    assert res.stderr.count("\n") == 1
