"""Tests for benchmarks/: the 2019 slide model and the throughput harness at tiny size.

They check that the harness measures the right thing (shapes, losses, ratios, MFU arithmetic, the
files it writes), never how fast anything is.
"""

import dataclasses
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy import stats as sps

from benchmarks import replicate
from benchmarks import throughput as tp
from benchmarks.slide_model import SlideTransformerWithLMHead
from tutorial_lib import config, results, stats
from tutorial_lib.models import TransformerConfig, TransformerLM, count_parameters
from tutorial_lib.ops import report as reports

CFG = TransformerConfig(vocab_size=64, d_model=32, n_layer=2, n_head=4, d_ff=64, max_len=16,
                        dropout=0.1)


def _slide(cfg: TransformerConfig = CFG) -> SlideTransformerWithLMHead:
    torch.manual_seed(0)
    return SlideTransformerWithLMHead(cfg).eval()


def _ids(seq: int = 10, batch: int = 3) -> torch.Tensor:
    return torch.randint(0, CFG.vocab_size, (seq, batch), generator=torch.Generator().manual_seed(0))


# --- the slide model ------------------------------------------------------------------------------


def test_slide_model_shapes_tied_head_and_loss_near_ln_v_at_init():
    model, x = _slide(), _ids()
    with torch.no_grad():
        logits, loss = model(x, labels=x)
    assert logits.shape == (10, 3, CFG.vocab_size)  # [seq, batch, V]: the head runs on all T
    assert model.lm_head.weight is model.transformer.tokens_embeddings.weight
    assert torch.isfinite(loss) and abs(loss.item() - math.log(CFG.vocab_size)) < 0.05
    # causal: position t predicts token t + 1
    want = F.cross_entropy(logits[:-1].reshape(-1, CFG.vocab_size), x[1:].reshape(-1))
    torch.testing.assert_close(loss, want)


@pytest.mark.parametrize("causal", [True, False])
def test_slide_model_attention_mask_is_causal_exactly_when_asked(causal):
    model = _slide(dataclasses.replace(CFG, causal=causal))
    x = _ids()
    y = x.clone()
    y[6] = (x[6] + 1) % CFG.vocab_size  # change the token at position 6 only
    with torch.no_grad():
        a, b = model(x), model(y)
    scale = a.abs().max()
    before = (a[:6] - b[:6]).abs().max()
    assert (a[6:] - b[6:]).abs().max() > 1e-2 * scale  # position 6 and later see the change
    if causal:
        assert before <= 1e-6 * scale, "a position <= 5 saw the token at position 6"
    else:
        assert before > 1e-3 * scale  # the bidirectional model does (so the check can fail)


def test_slide_model_renormalises_the_stream_as_the_slides_did():
    """One layer, by hand: h = LN1(e); h = h + Attn(h); h = LN2(h); h = h + FF(h); no final LN."""
    cfg = dataclasses.replace(CFG, n_layer=1, dropout=0.0)
    model = _slide(cfg)
    t = model.transformer
    x = _ids()
    with torch.no_grad():
        e = t.tokens_embeddings(x) + t.position_embeddings(torch.arange(10))[:, None]
        h = t.layer_norms_1[0](e)
        mask = torch.triu(torch.full((10, 10), float("-inf")), diagonal=1)
        h = h + t.attentions[0](h, h, h, attn_mask=mask, need_weights=False)[0]
        h = t.layer_norms_2[0](h)
        h = h + t.feed_forwards[0](h)
        torch.testing.assert_close(t(x), h)
    assert t.layer_norms_1[0].eps == 1e-12
    assert isinstance(t.feed_forwards[0][1], torch.nn.ReLU)


def test_slide_model_has_our_weight_shapes():
    """Same config, same matrices: ours has one more LayerNorm (the final one), nothing else."""
    ours = TransformerLM(CFG)
    slide = _slide()
    assert count_parameters(ours) - count_parameters(slide) == 2 * CFG.d_model
    qkv = ours.transformer.blocks[0].attn.qkv.weight
    assert slide.transformer.attentions[0].in_proj_weight.shape == qkv.shape
    assert tp.mfu_params(slide) == count_parameters(slide) - CFG.max_len * CFG.d_model
    assert tp.mfu_params(ours) == count_parameters(ours) - CFG.max_len * CFG.d_model


# --- arithmetic --------------------------------------------------------------------------------------


def test_tokens_per_second_and_mfu_on_known_numbers():
    assert tp.tokens_per_second(seconds=2.0, steps=10, tokens_per_step=100) == 500.0
    # GPT-2 small at 1024 tokens: 6·124M + 12·12·768·1024 = 857,246,208 FLOPs per token
    fpt = tp.flops_per_token(124_000_000, 12, 768, 1024)
    assert fpt == 857_246_208
    assert tp.mfu(1e5, 124_000_000, 12, 768, 1024, 312e12) == pytest.approx(857_246_208e5 / 312e12)
    assert tp.mfu(1e5, 124_000_000, 12, 768, 1024, 312e12) == pytest.approx(0.27476, abs=1e-5)


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H100 PCIe", 756e12), ("NVIDIA H200", 989e12),
    ("NVIDIA A100-SXM4-80GB", 312e12), ("NVIDIA GeForce GTX 1080", None),
])
def test_peak_flops_table(name, peak):
    assert tp.peak_flops_for(name) == peak


# --- the harness at tiny size ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    result = tp.main(["--size", "tiny", "--device", "cpu", "--out", str(out), "--peak-tflops", "1"])
    return result, out


def test_pretraining_numbers_are_consistent(tiny_run):
    pre = tiny_run[0]["pretraining"]
    size = tp.bench_size("tiny")
    ln_v = math.log(size.model.vocab_size)
    assert pre["ln_vocab"] == pytest.approx(ln_v)
    assert pre["tokens_per_step"] == size.batch_size * size.seq_len
    for kind in ("ours", "slide"):
        r = pre[kind]
        assert r["tokens_per_s"] > 0 and len(r["tokens_per_s_rounds"]) == size.rounds
        assert r["init_loss_ok"] and abs(r["init_loss"] - ln_v) < tp.INIT_LOSS_TOLERANCE
        assert r["seconds_per_step"] > 0
        # MFU from the numbers it reports, with the 1 TFLOP/s given on the command line
        assert r["flops_per_token"] == tp.flops_per_token(r["mfu_params"], size.model.n_layer,
                                                          size.model.d_model, size.seq_len)
        assert r["mfu"] == pytest.approx(r["tokens_per_s"] * r["flops_per_token"] / 1e12)
    assert pre["ratio"] == pytest.approx(pre["ours"]["tokens_per_s"] / pre["slide"]["tokens_per_s"])
    assert pre["ratio_rounds"] == pytest.approx(
        [o / s for o, s in zip(pre["ours"]["tokens_per_s_rounds"], pre["slide"]["tokens_per_s_rounds"])])
    # the fp32 reference exists exactly when the like-for-like runs are in a low precision
    assert ("slide_fp32" in pre) == (pre["precision"] != "fp32")


def test_finetune_costs_have_one_row_per_method_relative_to_plain(tiny_run):
    rows = {r["method"]: r for r in tiny_run[0]["finetune"]}
    assert list(rows) == list(tp.METHODS)
    assert rows["fine-tuning"]["relative"] == 1.0
    base = rows["fine-tuning"]["seconds_per_step"]
    for r in rows.values():
        assert r["seconds_per_step"] > 0
        assert r["relative"] == pytest.approx(r["seconds_per_step"] / base)
        assert r["seq_len"] == tp.bench_size("tiny").ft_seq_len  # same tokens for every method
    assert rows["adapters (m=64)"]["trainable_params"] < rows["adapters (m=64)"]["total_params"]
    assert rows["fine-tuning"]["trainable_params"] == rows["fine-tuning"]["total_params"]
    assert (rows["TDT"]["forward_passes"], rows["R-Drop"]["forward_passes"]) == (3, 2)


def test_results_written_atomically_with_the_expected_keys(tiny_run):
    result, out = tiny_run
    stem = f"{tp.device_tag(torch.device('cpu'))}-tiny"
    data = json.loads((out / f"{stem}.json").read_text())
    assert {"size", "environment", "config", "pretraining", "finetune"} <= set(data)
    assert {"device_name", "torch", "date", "python"} <= set(data["environment"])
    assert data["environment"]["torch"] == torch.__version__
    assert data["config"]["d_model"] == tp.bench_size("tiny").model.d_model
    assert data["pretraining"]["ratio"] == pytest.approx(result["pretraining"]["ratio"])
    report = (out / f"{stem}.md").read_text()
    assert "Ratio ours / slide" in report and "| DART |" in report
    assert not list(out.glob("*.tmp"))


def test_unknown_size_is_refused():
    with pytest.raises(ValueError, match="unknown size"):
        tp.bench_size("huge")


def test_the_gpu_and_paper_sizes_are_the_scales_models_and_batches():
    """What the P2 throughput runs time on a GPU (nothing is run here): each scale's model and its
    pretraining batch x sequence, stated in the result."""
    for name, layers, d, batch in (("gpu", 8, 512, 64), ("paper", 16, 410, 8)):
        size = tp.bench_size(name)
        assert (size.model.n_layer, size.model.d_model, size.batch_size, size.seq_len) == (
            layers, d, batch, 256)


# --- efficiency: achieved GFLOP/s against the measured matmul peak -----------------------------------


def test_finetune_flops_on_known_numbers():
    cfg = TransformerConfig(vocab_size=8000, d_model=256, n_layer=4, n_head=4, d_ff=1024, max_len=128)
    # per token 6·4·(4·256² + 2·256·1024) + 12·4·256·32 = 18,874,368 + 393,216; per row 6·256·2
    want = 32 * 32 * (18_874_368 + 393_216) + 32 * 3_072
    assert tp.finetune_flops_per_step(cfg, batch_size=32, seq_len=32, num_labels=2) == want


def test_matmul_peak_is_the_best_size_per_dtype():
    peak = tp.matmul_peak("cpu", sizes=(32, 64), repeats=1)
    assert set(peak) == {"bf16", "fp32"}
    for r in peak.values():
        assert set(r["by_size"]) == {32, 64} and all(v > 0 for v in r["by_size"].values())
        assert r["gflops"] == max(r["by_size"].values())
        assert r["gflops_cpu"] == max(r["by_size_cpu"].values()) > 0


def test_efficiency_is_achieved_flops_over_the_peak(tiny_run):
    result, out = tiny_run
    eff = result["efficiency"]
    peak = eff["peak_gflops"]
    assert set(peak) == {"bf16", "fp32"} and all(v > 0 for v in peak.values())
    pre = result["pretraining"]
    threads = eff["threads"]
    assert threads == torch.get_num_threads() and set(eff["peak_gflops_cpu"]) == {"bf16", "fp32"}
    for kind, r in eff["pretraining"].items():
        flops = pre["tokens_per_step"] * pre[kind]["flops_per_token"]
        want = flops / pre[kind]["seconds_per_step"] / 1e9
        assert r["gflops"] == pytest.approx(want)
        assert r["of_peak_fp32"] == pytest.approx(want / peak["fp32"])
        assert r["of_peak_own_precision"] == pytest.approx(want / peak[r["precision"]])
        want_cpu = flops / (pre[kind]["cpu_seconds_per_step"] / threads) / 1e9
        assert r["gflops_cpu"] == pytest.approx(want_cpu)
        assert r["of_peak_bf16_cpu"] == pytest.approx(want_cpu / eff["peak_gflops_cpu"]["bf16"])
    plain = next(row for row in result["finetune"] if row["method"] == "fine-tuning")
    ft = eff["finetuning"]["fine-tuning"]
    assert ft["gflops"] == pytest.approx(plain["flops_per_step"] / plain["seconds_per_step"] / 1e9)
    assert ft["gflops_cpu"] == pytest.approx(
        plain["flops_per_step"] / (plain["cpu_seconds_per_step"] / threads) / 1e9)
    assert list(eff["finetuning"]) == ["fine-tuning"]  # the other methods do other work per step
    stem = f"{tp.device_tag(torch.device('cpu'))}-tiny"
    assert "## Efficiency" in (out / f"{stem}.md").read_text()
    assert json.loads((out / f"{stem}.json").read_text())["efficiency"]["peak_gflops"] == pytest.approx(peak)


def test_the_pretraining_step_trains_in_fp16_with_a_scaler():
    """What a T4 gets (runtime.autocast_dtype: fp16 below compute capability 8.0), here on the CPU."""
    model = TransformerLM(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = tp.make_pretrain_step(model, "ours", opt, torch.device("cpu"), torch.float16)
    before = model.transformer.blocks[0].attn.qkv.weight.detach().clone()
    ids = torch.randint(5, CFG.vocab_size, (4, 12), generator=torch.Generator().manual_seed(0))
    losses = [step(ids).item() for _ in range(3)]
    assert all(math.isfinite(x) for x in losses)
    assert not torch.equal(before, model.transformer.blocks[0].attn.qkv.weight)


def test_efficiency_from_an_earlier_result_file(tiny_run):
    """The steps of a stored run against a peak measured now (on the CPU-time clock on a CPU)."""
    result, out = tiny_run
    path = out / f"{tp.device_tag(torch.device('cpu'))}-tiny.json"
    again = tp.efficiency_from_file(path, "cpu", sizes=(32, 64), repeats=1)
    eff, raw = again["efficiency"], again["peak_measured"]["raw"]
    assert again["peak_measured"]["clock"] == "cpu time" and "CPU-time" in eff["peak_clock"]
    assert eff["peak_gflops"] == pytest.approx({k: v["gflops_cpu"] for k, v in raw.items()})
    pre = result["pretraining"]
    ours = pre["tokens_per_step"] * pre["ours"]["flops_per_token"] / pre["ours"]["seconds_per_step"] / 1e9
    assert eff["pretraining"]["ours"]["gflops"] == pytest.approx(ours)
    assert "gflops_cpu" not in eff["pretraining"]["ours"]  # the stored steps are wall-clock only
    assert list(eff["finetuning"]) == ["fine-tuning"]
    report = tp.efficiency_markdown(again)
    assert "| pretraining, ours | " in report and again["steps_from"]["file"] in report


# --- held-out replication (benchmarks/replicate.py; issue 21) --------------------------------------


def _effects_of_run(deltas: dict[str, list[float]], seeds: list[int], notebook: str = "02_x",
                    floor: float | None = None) -> list[dict]:
    """A run's effect records, as a notebook would save them: each method's per-seed errors are
    the baseline's plus ``deltas[method]`` (points/100), compared by the verdict rule."""
    base = [0.20 + 0.03 * (s % 3) for s in seeds]
    rows = [{"method": "base", "seed": s, "test_error": b} for s, b in zip(seeds, base)]
    for method, d in deltas.items():
        rows += [{"method": method, "seed": s, "test_error": b + x / 100}
                 for s, b, x in zip(seeds, base, d)]
    table = stats.compare(pd.DataFrame(rows), "base", floor=floor)
    return [{"notebook": notebook, **e} for e in results.effects(table, metric="err", backbone="x")]


FIRST_SEEDS, HELD_SEEDS = [0, 1, 2], [1000, 1001, 1002]
FIRST = {"holds": [-3.0, -3.5, -2.5], "flips": [-3.0, -3.5, -2.5], "null": [0.5, -0.5, 0.2],
         "gone": [-3.0, -3.2, -2.8]}
HELD = {"holds": [-2.5, -3.5, -3.0], "flips": [-6.0, 1.0, -2.0], "null": [0.4, -0.1, 0.0]}


def test_seed_set_moves_every_seed_field_for_the_held_out_run(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class S:
        seeds: tuple[int, ...] = (0, 1, 2)
        splits: tuple[int, ...] = (13, 21)
        bad_splits: tuple[int, ...] = (13,)
        control_seed: int = 0
        adv_seeds: tuple[int, ...] = (0, 1)
        steps: int = 20  # not a seed
        seed_words: bool = True  # not an int field

    seed_fields = ["seeds", "splits", "bad_splits", "control_seed", "adv_seeds", "seed_words"]
    monkeypatch.delenv(config.SEEDS_ENV_VAR, raising=False)
    assert config.seed_set() == "main" and config.apply_seed_set(S(), seed_fields) == S()
    monkeypatch.setenv(config.SEEDS_ENV_VAR, "held-out")
    held = config.apply_seed_set(S(), seed_fields)
    assert held.seeds == (1000, 1001, 1002) and held.splits == (1013, 1021)
    assert held.bad_splits == (1013,) and held.control_seed == 1000 and held.adv_seeds == (1000, 1001)
    assert held.steps == 20 and held.seed_words is True
    assert not set(held.seeds) & set(S().seeds)  # disjoint
    monkeypatch.setenv(config.SEEDS_ENV_VAR, "2000")  # a seed set of one's own: an integer offset
    assert config.seed_set() == "offset 2000"
    assert config.apply_seed_set(S(), seed_fields).splits == (2013, 2021)
    for bad in ("tuned", "-5"):
        monkeypatch.setenv(config.SEEDS_ENV_VAR, bad)
        with pytest.raises(config.ConfigError, match=f"unknown seed set '{bad}'.*main, held-out or a"):
            config.seed_set()


def test_replicated_means_same_sign_and_a_held_out_ci_that_excludes_zero():
    first = _effects_of_run(FIRST, FIRST_SEEDS)
    held = _effects_of_run(HELD, HELD_SEEDS)
    by = {e["method"]: e for e in first}
    assert by["holds"]["verdict"] == by["flips"]["verdict"] == "better"
    assert by["null"]["verdict"] == stats.WITHIN_NOISE
    record = replicate.replicate(first, held, first_seeds={"02_x": FIRST_SEEDS},
                                 held_out_seeds={"02_x": HELD_SEEDS})
    got = {r["method"]: r for r in record["effects"]}
    assert got["holds"]["status"] == "replicated"
    assert got["flips"]["status"] == "not replicated"  # same sign, but the CI reaches past zero
    assert got["flips"]["held_out"]["delta"] < 0 and got["flips"]["held_out"]["verdict"] == stats.WITHIN_NOISE
    assert got["null"]["status"].startswith("nothing to replicate")
    assert got["gone"]["status"] == "missing in the held-out run" and got["gone"]["pooled"] is None
    assert record["counts"] == {"replicated": 1, "not replicated": 1, "nothing to replicate": 1,
                                "missing in the held-out run": 1}
    assert "excludes zero" in record["definition"] and "seed + 1000" in record["seed_rule"]


def test_the_pooled_test_is_the_paired_t_test_over_both_seed_sets():
    first = _effects_of_run(FIRST, FIRST_SEEDS)
    held = _effects_of_run(HELD, HELD_SEEDS)
    record = replicate.replicate(first, held)
    flips = next(r for r in record["effects"] if r["method"] == "flips")
    both = np.array(FIRST["flips"] + HELD["flips"])  # the per-seed differences, in points
    want = sps.ttest_1samp(both, 0.0)
    assert flips["pooled"]["test"] == "paired t, both seed sets" and flips["pooled"]["n"] == 6
    assert flips["pooled"]["delta"] == pytest.approx(both.mean(), abs=1e-3)
    assert flips["pooled"]["p"] == pytest.approx(want.pvalue, rel=0.02)  # se from a 2-decimal CI
    low, high = replicate.ci_of(flips["pooled"])
    ci = want.confidence_interval(0.95)
    assert (low, high) == pytest.approx((ci.low, ci.high), abs=0.02)
    # unpaired runs: an inverse-variance weighted z-test of the two Δs
    a = {**first[0], "test": "Welch t", "delta": -3.0, "se": 1.0, "n": 3}
    b = {**first[0], "test": "Welch t", "delta": -1.0, "se": 1.0, "n": 3}
    z = replicate.pooled(a, b)
    assert z["delta"] == pytest.approx(-2.0) and z["p"] == pytest.approx(2 * sps.norm.sf(2 * math.sqrt(2)))


def test_void_comparisons_and_reused_seeds_are_not_replications():
    first = _effects_of_run({"m": [-3.0, -3.5, -2.5]}, FIRST_SEEDS, floor=0.21)  # base ≈ its floor
    assert first[0]["verdict"] == stats.VOID_AT_CHANCE
    held = _effects_of_run({"m": [-3.0, -3.5, -2.5]}, HELD_SEEDS)
    assert replicate.replicate(first, held)["effects"][0]["status"].startswith("void in the first run")
    ok = _effects_of_run({"m": [-3.0, -3.5, -2.5]}, FIRST_SEEDS)
    same = replicate.replicate(ok, ok, first_seeds={"02_x": [0, 1, 2]},
                               held_out_seeds={"02_x": {"small": [0, 1, 2]}})
    assert same["effects"][0]["status"] == "not held out (seeds [0, 1, 2] in both runs)"


def test_identical_arms_are_untestable_never_not_replicated():
    """07's held-out run: the pool shrank, and two arms were the same runs (+0.00, CI [+0.00,
    +0.00], p = 1.0). An effect claimed in the first run is then untestable there, its own
    category; a saved record from before the rule is read the same way."""
    first = _effects_of_run({"m": [-3.0, -3.5, -2.5]}, FIRST_SEEDS)
    assert first[0]["verdict"] == "better"
    held = _effects_of_run({"m": [0.0, 0.0, 0.0]}, HELD_SEEDS)
    assert held[0]["verdict"] == stats.UNTESTABLE_IDENTICAL
    record = replicate.replicate(first, held)
    assert record["effects"][0]["status"].startswith("untestable in the held-out run")
    assert record["counts"] == {"untestable in the held-out run": 1}
    old = [{**held[0], "verdict": stats.WITHIN_NOISE, "ci95": "[+0.00, +0.00]"}]
    assert replicate.replicate(first, old)["effects"][0]["status"].startswith("untestable")
    assert replicate.replicate(held, held)["effects"][0]["status"].startswith(
        "untestable in the first run")


def test_replicate_main_writes_replication_json_and_the_results_md_table(tmp_path):
    """The benchmark end to end on synthetic result files (what the notebooks' runs would save)."""
    first_dir, held_dir = tmp_path / "classroom", tmp_path / "classroom" / "held-out"
    for directory, deltas, seeds in ((first_dir, FIRST, FIRST_SEEDS), (held_dir, HELD, HELD_SEEDS)):
        directory.mkdir(parents=True)
        effects = _effects_of_run(deltas, seeds)
        (directory / "02_x.json").write_text(json.dumps({"notebook": "02_x", "seeds": seeds,
                                                         "effects": effects}))
        if directory == first_dir:
            (directory / reports.EFFECTS_NAME).write_text(json.dumps(effects))
    (first_dir / reports.REPORT_NAME).write_text("# Results\n\n## Results at a glance\n\nx\n\n"
                                                 "## Contents\n\n- 02_x\n")
    record = replicate.main(["--first", str(first_dir), "--held-out", str(held_dir)])
    saved = json.loads((first_dir / reports.REPLICATION_NAME).read_text())
    assert saved["counts"] == record["counts"] and saved["seeds"]["02_x"] == {
        "first": FIRST_SEEDS, "held_out": HELD_SEEDS}
    report = (first_dir / reports.REPORT_NAME).read_text()
    assert report.index("## Held-out replication") < report.index("## Contents")
    assert re.search(r"\|\s*02_x\s*\|\s*holds vs base\s*\|.*\|\s*replicated\s*\|", report)
    replicate.main(["--first", str(first_dir), "--held-out", str(held_dir)])  # again: replaced
    assert (first_dir / reports.REPORT_NAME).read_text().count("## Held-out replication") == 1
    # a seed set of one's own: its record beside its results, the committed ones left alone
    committed = {p.name: p.read_bytes() for p in first_dir.iterdir() if p.is_file()}
    own = replicate.main(["--first", str(first_dir), "--held-out", str(held_dir), "--seeds", "2000"])
    assert json.loads((held_dir / reports.REPLICATION_NAME).read_text())["counts"] == own["counts"]
    assert {p.name: p.read_bytes() for p in first_dir.iterdir() if p.is_file()} == committed
    with pytest.raises(config.ConfigError, match="unknown seed set 'tuned'"):
        replicate.main(["--first", str(first_dir), "--seeds", "tuned"])


def test_replicate_only_narrows_the_re_run_never_the_record(tmp_path):
    """A re-run of one notebook (``--only 05``) once rewrote replication.json with that notebook
    alone, dropping every other notebook's replication; the record covers the whole first run."""
    first_dir, held_dir = tmp_path / "classroom", tmp_path / "classroom" / "held-out"
    first_dir.mkdir(parents=True)
    held_dir.mkdir()
    effects = []
    for nb in ("02_x", "05_y"):
        run = _effects_of_run(FIRST, FIRST_SEEDS, notebook=nb)
        (first_dir / f"{nb}.json").write_text(json.dumps({"notebook": nb, "seeds": FIRST_SEEDS,
                                                          "effects": run}))
        effects += run
        held = _effects_of_run(HELD, HELD_SEEDS, notebook=nb)
        (held_dir / f"{nb}.json").write_text(json.dumps({"notebook": nb, "seeds": HELD_SEEDS,
                                                         "effects": held}))
    (first_dir / reports.EFFECTS_NAME).write_text(json.dumps(effects))
    (first_dir / reports.REPORT_NAME).write_text("# Results\n\n## Contents\n")
    record = replicate.main(["--first", str(first_dir), "--held-out", str(held_dir),
                             "--only", "05"])
    assert {e["notebook"] for e in record["effects"]} == {"02_x", "05_y"}


def test_write_json_stamps_the_date_first_and_leaves_no_temporary(tmp_path):
    import benchmarks

    path = tmp_path / "sub" / "r.json"
    doc = benchmarks.write_json(path, {"runs": [1], "date": "stale"})
    assert list(doc) == ["date", "runs"] and doc["date"] != "stale"
    assert json.loads(path.read_text()) == doc
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
