"""Launch and benchmark commands (servesim.plan.launch) and reading them back (launch_parse).

What is checked: every flag the launch and benchmark commands emit is in the engine's or client's
own list (data/engine_flags.toml, extracted from their sources); the scripts are valid shell that
hands the engine the arguments meant (run against stub programs); a script read back gives the
deployment and the benchmark written out (in canonical form) and the same prediction; a plan row's
benchmark is its replica's share of the row's rate.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from servesim.hardware.pricer import Deployment
from servesim.plan.launch import (
    benchmark_command,
    deploy_colocated,
    deploy_disaggregated,
    engine_command,
    flag_lists,
    flag_profile,
    options_file,
    row_deploy,
    unknown_flags,
)
from servesim.plan.launch_parse import canonical, parse_benchmark, parse_launch, split_script
from servesim.sim.batching import Benchmark
from servesim.sim.client import Client

LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"
LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
R1 = "deepseek-ai/DeepSeek-R1"
TRTLLM_YAML = str(options_file("trtllm"))  # TensorRT-LLM's LLM-API options file in a launch script

DEPLOYMENTS = [
    Deployment(LLAMA70, "h100-sxm", tp=2, dtype="fp8", engine="vllm"),
    Deployment(LLAMA70, "h100-sxm", tp=2, dtype="fp8", engine="sglang"),
    Deployment(LLAMA70, "h100-sxm", tp=2, dtype="fp8", engine="trtllm"),
    Deployment(
        LLAMA8,
        "h100-sxm",
        dtype="bf16",
        engine="vllm",
        max_num_batched_tokens=2048,
        max_num_seqs=128,
        memory_fraction=0.85,
        cuda_graph_max_tokens=256,
        overlap=False,
    ),
    Deployment(
        LLAMA8,
        "h200",
        engine="sglang",
        kv_dtype="fp8",
        overlap=False,
        cuda_graph_max_tokens=64,
        scheduler=(
            ("enable_mixed_chunk", True),
            ("max_prefill_tokens", 8192),
            ("scheduler_recv_interval", 10),
        ),
    ),
    Deployment(
        LLAMA8,
        "h100-sxm",
        engine="trtllm",
        kv_dtype="fp8",
        overlap=False,
        cuda_graph_max_tokens=128,
        scheduler=(("enable_chunked_prefill", True),),
        memory_fraction=0.8,
    ),
    Deployment(R1, "h200", tp=1, dp=8, ep=8, dtype="fp8", kv_dtype="fp8", engine="sglang", ep_comm="deepep"),
    Deployment(R1, "h200", tp=1, dp=8, ep=8, dtype="fp8", engine="vllm", ep_comm="deepep_normal"),
    Deployment(
        R1,
        "h200",
        tp=1,
        dp=8,
        ep=8,
        dtype="fp8",
        engine="trtllm",
        ep_comm="deepep_normal",
        moe_backend="deepgemm",
        piecewise_cuda_graphs=True,
    ),
    Deployment("openai/gpt-oss-120b", "b200", dtype="fp4", engine="vllm", moe_activations="mxfp8"),
]
IDS = [f"{d.engine}-{d.model.split('/')[-1]}-tp{d.tp}dp{d.dp}" for d in DEPLOYMENTS]

BENCHES = [
    Benchmark(isl=2000, osl=300, rate_per_s=3.598),
    Benchmark(isl=1024, osl=1024, concurrency=64, client=Client(name="inferencemax")),
    Benchmark(
        isl=1000,
        osl=200,
        concurrency=16,
        num_prompts=320,
        seed=7,
        warmup=20,
        client=Client(name="sglang", random_range_ratio=0.5, num_warmups=4),
    ),
    Benchmark(
        isl=500,
        osl=100,
        rate_per_s=2.5,
        concurrency=8,
        client=Client(name="vllm", random_range_ratio=0.25, burstiness=0.5, num_warmups=3),
    ),
]


# ------------------------------------------------------------------------------ the flag lists


def test_every_list_names_its_source() -> None:
    data = flag_lists()
    tables = (
        [data[e] for e in ("vllm", "sglang", "trtllm")]
        + [data["trtllm"]["llm_api"]]
        + list(data["client"].values())
    )
    for t in tables:
        for key in ("repo", "path", "commit", "license"):
            assert t.get(key), (t.get("program"), key)


@pytest.mark.parametrize("dep", DEPLOYMENTS, ids=IDS)
def test_every_emitted_flag_is_the_engines(dep: Deployment) -> None:
    spec = "mtp" if dep.model == R1 else "eagle3"
    for kw in ({}, {"spec": spec, "k": 3}):
        cmd, _ = engine_command(dep, **kw)
        assert unknown_flags(cmd) == []
        s = split_script(cmd)
        assert s.program == dep.engine and len(s.args) > 4  # the flags were read, not skipped


@pytest.mark.parametrize("bench", BENCHES, ids=["vllm-rate", "inferencemax", "sglang", "vllm-both"])
def test_every_benchmark_flag_is_the_clients(bench: Benchmark) -> None:
    for dep in DEPLOYMENTS[:3]:
        cmd = benchmark_command(bench, dep)
        assert unknown_flags(cmd) == []
        assert split_script(cmd).program == f"client.{bench.client.name}"


def test_a_flag_outside_the_lists_is_caught() -> None:
    cmd, _ = engine_command(DEPLOYMENTS[0])
    assert unknown_flags(cmd.replace("--max-num-seqs", "--max-num-sequences")) == ["--max-num-sequences"]
    assert unknown_flags(cmd.replace("--async-scheduling", "--no-async-scheduling")) == []  # negatable
    assert unknown_flags(cmd.replace("--dtype", "--no-dtype")) == ["--no-dtype"]  # not negatable
    trt, _ = engine_command(DEPLOYMENTS[2])
    assert unknown_flags(trt.replace("free_gpu_memory_fraction:", "free_memory_fraction:")) == [
        "kv_cache_config.free_memory_fraction (LLM-API option)"
    ]
    assert unknown_flags(trt.replace("--tp_size", "--tp-size")) == ["--tp-size"]  # click: underscores


# ------------------------------------------------------------------------------ what the scripts say


def _opts(cmd: str) -> dict[str, str | None]:
    return split_script(cmd).options()


def test_settings_the_prediction_assumed_are_spelt_out() -> None:
    dep = DEPLOYMENTS[3]
    eng = flag_profile(dep)
    o = _opts(engine_command(dep)[0])
    assert o["--max-num-batched-tokens"] == "2048" and o["--max-num-seqs"] == "128"
    assert o["--gpu-memory-utilization"] == "0.85" and o["--max-cudagraph-capture-size"] == "256"
    assert "--no-async-scheduling" in o and eng.max_num_batched_tokens == 2048
    # left at its default, the budget is the engine's own for the GPU: 8192 on an H100, 2048 on an A100
    assert _opts(engine_command(Deployment(LLAMA8, "h100-sxm"))[0])["--max-num-batched-tokens"] == "8192"
    assert _opts(engine_command(Deployment(LLAMA8, "a100-80gb"))[0])["--max-num-batched-tokens"] == "2048"


def test_sglang_tp_size_is_the_whole_replica() -> None:
    o = _opts(engine_command(DEPLOYMENTS[6])[0])
    assert (o["--tp-size"], o["--dp-size"], o["--ep-size"]) == ("8", "8", "8")
    assert "--enable-dp-attention" in o and (o["--moe-a2a-backend"], o["--deepep-mode"]) == (
        "deepep",
        "low_latency",
    )
    assert o["--kv-cache-dtype"] == "fp8_e4m3"


def test_the_checkpoint_is_named_or_asked_for() -> None:
    vllm, notes = engine_command(DEPLOYMENTS[0])
    assert split_script(vllm).positional == LLAMA70 and _opts(vllm)["--quantization"] == "fp8"
    assert any("quantizes the bf16 checkpoint" in n for n in notes)
    trt, notes = engine_command(DEPLOYMENTS[2])  # trtllm-serve quantizes nothing: the user supplies it
    assert '"${CHECKPOINT:?set CHECKPOINT to an FP8 checkpoint of ' + LLAMA70 in trt
    assert any("trtllm-serve quantizes no weights" in n for n in notes)
    bf16, notes = engine_command(Deployment(LLAMA8, "h100-sxm", dtype="bf16"))
    assert "--quantization" not in _opts(bf16) and not any("checkpoint" in n for n in notes)
    r1, _ = engine_command(DEPLOYMENTS[7])  # DeepSeek-R1's own checkpoint is block FP8: named as is
    assert split_script(r1).positional == R1 and "CHECKPOINT" not in r1
    names = (("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B"), ("llama-3-70b", "meta-llama/Meta-Llama-3-70B"))
    for name, hf_id in names:
        cmd = engine_command(Deployment(name, "h200", tp=8))[0]  # a catalog name launches its checkpoint
        assert split_script(cmd).positional == hf_id and parse_launch(cmd).deployment.model == name


# ------------------------------------------------------------------------------ the shell runs them


def _stub_bin(tmp: Path) -> Path:
    """A folder of stub programs that print their arguments as JSON (and the TensorRT-LLM options)."""
    b = tmp / "bin"
    b.mkdir()
    for name in ("vllm", "trtllm-serve", "python"):
        p = b / name
        p.write_text(
            "#!/bin/sh\nexec "
            + shlex.quote(shutil.which("python3") or "python3")
            + " -c 'import json,sys; print(json.dumps(sys.argv[1:]))' \"$@\"\n"
        )
        p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return b


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_scripts_run_and_pass_the_arguments_meant(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{_stub_bin(tmp_path)}:{os.environ['PATH']}",
        "DRAFT_MODEL": "org/head",
        "CHECKPOINT": "org/ckpt-fp8",
    }
    for dep in DEPLOYMENTS[:3]:
        cmd, _ = engine_command(dep, spec="eagle3", k=3)
        run = subprocess.run(
            ["bash", "-c", cmd], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=30
        )
        assert run.returncode == 0, run.stderr
        argv = json.loads(run.stdout.strip().splitlines()[-1])
        if dep.engine == "vllm":
            config = json.loads(argv[argv.index("--speculative-config") + 1])
            assert config == {"method": "eagle3", "num_speculative_tokens": 3, "model": "org/head"}
        elif dep.engine == "sglang":
            assert argv[argv.index("--speculative-draft-model-path") + 1] == "org/head"
        else:
            assert argv[0] == "org/ckpt-fp8"
            yaml = (tmp_path / TRTLLM_YAML).read_text()
            assert 'speculative_model_dir: "org/head"' in yaml and "max_draft_len: 3" in yaml
    # without the checkpoint the TensorRT-LLM script stops and says what to supply
    env.pop("CHECKPOINT")
    run = subprocess.run(
        ["bash", "-c", engine_command(DEPLOYMENTS[2])[0]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=30,
    )
    assert run.returncode != 0 and "set CHECKPOINT to an FP8 checkpoint" in run.stderr


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("dep", DEPLOYMENTS, ids=IDS)
def test_a_launch_reads_back_as_its_deployment(dep: Deployment) -> None:
    spec = "mtp" if dep.model == R1 else "eagle3"
    for kw in ({}, {"spec": spec, "k": 2}):
        p = parse_launch(engine_command(dep, **kw)[0])
        assert p.deployment == canonical(dep, kw.get("spec"))
        assert canonical(p.deployment, kw.get("spec")) == p.deployment
        assert p.speculation.get("spec") == kw.get("spec") and p.speculation.get("k") == kw.get("k")


def test_canonical_reads_defaults_as_defaults() -> None:
    dep = Deployment(LLAMA8, "h100-sxm", max_num_batched_tokens=8192, max_num_seqs=1024, overlap=True)
    assert canonical(dep) == Deployment(LLAMA8, "h100-sxm")  # vLLM's defaults on an H100
    kept = Deployment(LLAMA8, "h100-sxm", max_num_batched_tokens=4096, overlap=False)
    assert canonical(kept) == kept
    # SGLang turns its overlap scheduler off for speculation: off is then the default, on is not
    sg = Deployment(LLAMA8, "h100-sxm", engine="sglang", overlap=False)
    assert canonical(sg, "eagle3").overlap is None and canonical(sg).overlap is False


@pytest.mark.parametrize("bench", BENCHES, ids=["vllm-rate", "inferencemax", "sglang", "vllm-both"])
def test_a_benchmark_reads_back_as_itself(bench: Benchmark) -> None:
    got = parse_benchmark(benchmark_command(bench, DEPLOYMENTS[0]))
    assert got.lengths() == bench.lengths() and got.prompts == bench.prompts and got.warmups == bench.warmups
    assert (got.rate_per_s, got.concurrency, got.seed, got.warmup) == (
        bench.rate_per_s,
        bench.concurrency,
        bench.seed,
        bench.warmup,
    )
    assert (got.client.name, got.client.ratio, got.client.burstiness) == (
        bench.client.name,
        bench.client.ratio,
        bench.client.burstiness,
    )


def test_sglang_tree_reads_back_as_a_tree() -> None:
    dep = Deployment(LLAMA8, "h100-sxm", engine="sglang")
    p = parse_launch(
        deploy_colocated(dep, BENCHES[0], spec="eagle3", k=3, tree=(3, 2, 4)).engine_commands[""]
    )
    assert p.speculation["tree"] == (3, 2, 4) and p.speculation["k"] is None
    p = parse_launch(deploy_colocated(dep, BENCHES[0], spec="eagle3", k=3).engine_commands[""])
    assert p.speculation["tree"] is None and p.speculation["k"] == 3


def test_disaggregated_pools_read_back() -> None:
    pre = Deployment(LLAMA70, "h100-sxm", tp=2, dtype="fp8", engine="sglang")
    dec = Deployment(LLAMA70, "h100-sxm", tp=4, dtype="bf16", engine="sglang")
    launch = deploy_disaggregated(pre, 3, dec, 2, 25e9, BENCHES[0])
    p, d = (parse_launch(launch.engine_commands[k]) for k in ("prefill", "decode"))
    assert (p.deployment, d.deployment) == (canonical(pre), canonical(dec))
    assert d.extra == {"mode": "disagg", "prefill_workers": "3", "decode_workers": "2", "link": "ib200"}
    assert _opts(launch.engine_commands["prefill"])["--disaggregation-mode"] == "prefill"
    assert {"prefill.sh", "decode.sh", "benchmark.sh", "dynamo.yaml"} <= set(launch.files)
    assert "llm-d-values.yaml" not in launch.files  # llm-d runs vLLM only
    assert any("prefill fp8, decode bf16" in n for n in launch.notes)
    vllm = deploy_disaggregated(
        replace(pre, engine="vllm"), 3, replace(dec, engine="vllm"), 2, 25e9, BENCHES[0]
    )
    values = vllm.files["llm-d-values.yaml"]
    assert "replicas: 3" in values and "replicas: 2" in values and 'nvidia.com/gpu: "4"' in values
    dynamo = vllm.files["dynamo.yaml"]
    assert 'kind: "DynamoGraphDeployment"' in dynamo and '"--is-prefill-worker"' in dynamo


def test_a_read_back_launch_predicts_the_same() -> None:
    from servesim.plan.predict import predict

    dep = Deployment(LLAMA8, "h100-sxm", max_num_seqs=64, overlap=False)
    bench = Benchmark(isl=512, osl=64, concurrency=8, num_prompts=40, client=Client(random_range_ratio=0.5))
    launch = deploy_colocated(dep, bench)
    p, b = parse_launch(launch.engine_commands[""]), parse_benchmark(launch.benchmark_command)
    a, c = predict(dep, bench), predict(p.deployment, b, **p.speculation)
    for key in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput", "decode_batch", "max_num_seqs"):
        assert a[key] == c[key], key


# ------------------------------------------------------------------------------ plan rows


def test_a_plan_row_measures_one_replica_at_its_share() -> None:
    q = SimpleNamespace(
        model=LLAMA70,
        isl=2000,
        osl=300,
        kv_dtype="bf16",
        engine="vllm",
        ep_comm=None,
        link_bytes_per_s=50e9,
        k=None,
        acceptance_length=None,
        traffic=None,
    )
    pool = {"tp": 2, "dtype": "fp8", "workers": 4}
    row = {
        "architecture": "colocated",
        "speculation": "none",
        "max_rate_rps": 14.39,
        "max_num_batched_tokens": 2048,
        "prefill": pool,
        "decode": pool,
        "steady_state": {"prompts": 4000, "warmup_prompts": 500},
    }
    d = row_deploy(row, q, "h100-sxm")
    bench = parse_benchmark(d["benchmark_command"])
    assert bench.rate_per_s == pytest.approx(14.39 / 4, rel=1e-15)
    assert (bench.prompts, bench.warmup) == (4000, 500) and "--save-detailed" in d["benchmark_command"]
    o = _opts(d["engine_command"])
    assert (o["--tensor-parallel-size"], o["--max-num-batched-tokens"], o["--quantization"]) == (
        "2",
        "2048",
        "fp8",
    )
    assert "# one of 4 replicas" in d["engine_command"] and parse_launch(d["engine_command"]).extra == {}
    from servesim.plan.confirm import row_deployments

    assert parse_launch(d["engine_command"]).deployment == canonical(row_deployments(row, q, "h100-sxm")[1])


# ------------------------------------------------------------------------------ the command line


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from servesim.cli.main import main

    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own refusals
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_json_carries_deploy_and_the_commands_read_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = [
        "predict",
        "--model",
        LLAMA8,
        "--gpu",
        "h100-sxm",
        "--isl",
        "512",
        "--osl",
        "64",
        "--concurrency",
        "8",
        "--num-prompts",
        "40",
        "--max-num-seqs",
        "64",
    ]
    code, out, _ = _cli([*flags, "--format", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    d = data["deploy"]
    assert set(d) >= {"engine_command", "benchmark_command", "files"} and "launch.sh" in d["files"]
    code, table, _ = _cli(flags, capsys)
    assert code == 0 and "deploy" not in table
    code, again, _ = _cli(
        ["predict", "--engine-command", d["engine_command"], "--bench-command", d["benchmark_command"]],
        capsys,
    )
    assert code == 0 and again == table
    code, _, err = _cli(["predict", "--engine-command", d["engine_command"]], capsys)
    assert code == 2 and "--bench-command is required" in err


def test_emit_writes_every_file_or_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = [
        "predict",
        "--model",
        LLAMA8,
        "--gpu",
        "h100-sxm",
        "--isl",
        "512",
        "--osl",
        "64",
        "--concurrency",
        "8",
        "--num-prompts",
        "40",
        "--engine",
        "trtllm",
    ]
    code, out, _ = _cli([*flags, "--emit", str(tmp_path / "out")], capsys)
    assert code == 0 and sorted(os.listdir(tmp_path / "out")) == ["benchmark.sh", TRTLLM_YAML, "launch.sh"]
    assert "wrote 3 files into" in out
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = _cli([*flags, "--emit", str(blocker)], capsys)
    assert code == 2 and "--emit" in err
    (tmp_path / "again" / "benchmark.sh").mkdir(parents=True)  # a folder where the second file goes
    code, _, err = _cli([*flags, "--emit", str(tmp_path / "again")], capsys)
    assert code == 2 and "nothing was written" in err
    assert os.listdir(tmp_path / "again") == ["benchmark.sh"]


def test_a_method_the_engine_lacks_is_said_and_kept_on_the_first_line() -> None:
    for engine, why in (("sglang", "SGLang has no such --speculative-algorithm"),
                        ("trtllm", "PyTorch backend runs no Medusa")):
        dep = Deployment(LLAMA8, "h100-sxm", engine=engine)
        cmd, notes = engine_command(dep, spec="medusa", k=4)
        assert any(why in n for n in notes) and "speculative" not in cmd.split("\n", 1)[1]
        p = parse_launch(cmd)
        assert (p.speculation["spec"], p.speculation["k"]) == ("medusa", 4)
    cmd, _ = engine_command(Deployment(LLAMA8, "h100-sxm"), spec="medusa", k=4)  # vLLM runs Medusa
    assert '\\"method\\":\\"medusa\\"' in cmd


def test_plan_rows_carry_deploy_and_a_dtype_change_is_said() -> None:
    from servesim.cli.deploy import plan_deploy

    q = SimpleNamespace(model=LLAMA70, isl=2000, osl=300, kv_dtype="bf16", engine="sglang", ep_comm=None,
                        link_bytes_per_s=50e9, k=None, acceptance_length=None, traffic=None, dtypes=(),
                        gpu="h100-sxm")
    pre, dec = {"tp": 2, "dtype": "fp8", "workers": 2}, {"tp": 4, "dtype": "bf16", "workers": 1}
    row = {"architecture": "disaggregated", "speculation": "none", "max_rate_rps": 10.45,
           "max_num_batched_tokens": 8192, "prefill": pre, "decode": dec}
    data = {"ranked": [row]}
    sets = plan_deploy(SimpleNamespace(format="json", emit=None), data, q, None)
    d = row["deploy"]
    assert sets == [("row01-", d)] and set(d["engine_commands"]) == {"prefill", "decode"}
    assert any("the plan chose fp8 weights where the checkpoint's own are bf16" in n for n in d["notes"])
    assert parse_benchmark(d["benchmark_command"]).rate_per_s == 10.45  # the whole deployment's rate
    asked = row_deploy(row, SimpleNamespace(**{**vars(q), "dtypes": ("fp8",)}), "h100-sxm")
    assert not any("the plan chose" in n for n in asked["notes"])
    plain = {"ranked": [{k: v for k, v in row.items() if k != "deploy"}]}
    assert plan_deploy(SimpleNamespace(format="table", emit=None), plain, q, None) == []
    assert "deploy" not in plain["ranked"][0]  # the table and CSV outputs stay as they were


def test_a_publishers_release_is_named_where_servesim_knows_one() -> None:
    qwen = "Qwen/Qwen3-235B-A22B"
    block = engine_command(Deployment(qwen, "h200", tp=4, dtype="fp8"))[0]
    assert split_script(block).positional == f"{qwen}-FP8"  # Qwen's block-FP8 release, as priced
    # at MoE TP8 the 1536-wide experts do not split into 128-row blocks: per-tensor FP8, made at load
    tensor = engine_command(Deployment(qwen, "h200", tp=8, dtype="fp8"))[0]
    assert split_script(tensor).positional == qwen and _opts(tensor)["--quantization"] == "fp8"
    fp4 = engine_command(Deployment(qwen, "b200", tp=4, dtype="fp4", engine="trtllm"))[0]
    assert split_script(fp4).positional == "nvidia/Qwen3-235B-A22B-NVFP4"
    assert parse_launch(fp4).deployment.dtype == "fp4"


def test_a_hand_written_command_takes_the_tools_defaults() -> None:
    p = parse_launch("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64", gpu="h100-sxm")
    assert p.deployment == Deployment(LLAMA8, "h100-sxm", dtype="auto", max_num_seqs=64)  # checkpoint = model
    b = parse_benchmark("vllm bench serve --max-concurrency 8")
    assert (b.isl, b.osl, b.prompts, b.seed, b.rate_per_s) == (1024, 128, 1000, 0, None)
    assert parse_benchmark("python -m sglang.bench_serving --dataset-name random").seed == 1
    with pytest.raises(Exception, match="servesim predicts the random dataset"):
        parse_benchmark("python -m sglang.bench_serving --random-input-len 100")  # ShareGPT by default
    with pytest.raises(Exception, match="give --gpu"):
        parse_launch("vllm serve meta-llama/Llama-3.1-8B-Instruct")


def test_dynamo_tensorrt_llm_workers_get_llm_api_files_of_known_keys() -> None:
    r1 = DEPLOYMENTS[8]
    launch = deploy_disaggregated(r1, 2, r1, 1, 50e9, BENCHES[1], spec="mtp", k=3)
    assert '"/config/dynamo-decode-llm-api.yaml"' in launch.files["dynamo.yaml"]
    for pool in ("prefill", "decode"):
        body = launch.files[f"dynamo-{pool}-llm-api.yaml"]
        serve = f"trtllm-serve {R1} --extra_llm_api_options {TRTLLM_YAML}"
        script = f"cat > {TRTLLM_YAML} <<EOF\n{body}EOF\n{serve}\n"
        assert unknown_flags(script) == []
        assert "tensor_parallel_size: 8" in body and "enable_attention_dp: true" in body


def test_a_read_back_disaggregated_launch_predicts_the_same() -> None:
    from servesim.cli.args import link
    from servesim.plan.predict import predict_disaggregated

    pre = Deployment(LLAMA8, "h100-sxm", dtype="fp8")
    dec = Deployment(LLAMA8, "h100-sxm", max_num_seqs=32, engine="vllm")
    bench = Benchmark(isl=512, osl=32, rate_per_s=4.0, num_prompts=40)
    launch = deploy_disaggregated(pre, 2, dec, 1, 12.5e9, bench)
    p, d = (parse_launch(launch.engine_commands[k]) for k in ("prefill", "decode"))
    b = parse_benchmark(launch.benchmark_command)
    ln = link(d.extra["link"])
    a = predict_disaggregated(pre, 2, dec, 1, 12.5e9, bench)
    c = predict_disaggregated(p.deployment, int(d.extra["prefill_workers"]), d.deployment,
                              int(d.extra["decode_workers"]), ln.bytes_per_s, b, **d.speculation)
    for key in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput", "decode_batch", "mean_kv_transfer_ms"):
        assert a[key] == c[key], key


def test_a_gpu_of_the_users_catalog_launches_and_reads_back(tmp_path: Path) -> None:
    from servesim.hardware.catalog import load_catalog

    cat_file = tmp_path / "cat.toml"
    cat_file.write_text("[gpu.my-h200]\nhbm_TBps = 4.8\nbf16_TFLOPS = 989.4\nmemory_GiB = 140.4\n"
                        "interconnect_GBps = 450\nfp8_TFLOPS = 1978.9\n")
    cat = load_catalog(str(cat_file))
    dep = Deployment(LLAMA8, "my-h200", dtype="fp8")
    launch = deploy_colocated(dep, BENCHES[0], catalog=cat)
    p = parse_launch(launch.engine_commands[""], catalog=cat)
    assert p.deployment == canonical(dep, catalog=cat) and "--gpu my-h200" in launch.engine_commands[""]
