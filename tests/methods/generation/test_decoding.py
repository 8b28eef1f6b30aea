"""Tests of tutorial_lib.methods.generation.decoding: our pickers against transformers' generate on a tiny
random Llama (built here from a LlamaConfig, no Hub), and the text metrics on known strings."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from tutorial_lib.methods.generation import decoding
from tutorial_lib.methods.generation.decoding import Strategy

VOCAB = 97


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_llama() -> LlamaForCausalLM:
    """2 layers, hidden 32, a peaked next-token distribution (initializer 0.3), no end-of-text
    token (every strategy runs the full length, as generate then does too)."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                      initializer_range=0.3, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return LlamaForCausalLM(cfg).eval()


def prompts(n: int = 3) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, VOCAB, (1, 5 + 2 * i), generator=g) for i in range(n)]


def hf(model: LlamaForCausalLM, prompt: torch.Tensor, strategy: Strategy, n: int) -> torch.Tensor:
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n,
                         min_new_tokens=n, **strategy.hf_kwargs())
    return out[:, prompt.shape[1]:]


def test_greedy_equals_generate(tiny_llama: LlamaForCausalLM) -> None:
    for prompt in prompts():
        ours = decoding.decode(tiny_llama, prompt, Strategy("greedy"), 20)
        assert torch.equal(ours, hf(tiny_llama, prompt, Strategy("greedy"), 20))
        assert len(set(ours[0].tolist())) > 1


@pytest.mark.parametrize("strategy", [
    Strategy("sample"),
    Strategy("sample", temperature=0.7),
    Strategy("sample", top_k=10),
    Strategy("sample", top_p=0.8),
    Strategy("sample", temperature=1.3, top_k=20, top_p=0.9),
], ids=str)
def test_sampling_equals_generate_on_the_same_seed(
    tiny_llama: LlamaForCausalLM, strategy: Strategy
) -> None:
    """Same filtered distribution + torch.multinomial on the same global generator = same draws."""
    draws = []
    for seed in range(3):
        for prompt in prompts():
            torch.manual_seed(seed)
            ours = decoding.decode(tiny_llama, prompt, strategy, 20)
            torch.manual_seed(seed)
            assert torch.equal(ours, hf(tiny_llama, prompt, strategy, 20)), (seed, prompt)
            draws.append(ours)
    assert len({tuple(d[0].tolist()) for d in draws}) > 3  # the seeds do change the text


def test_beam_search_equals_generate(tiny_llama: LlamaForCausalLM) -> None:
    beam = Strategy("beam", num_beams=4)
    for prompt in prompts():
        ours = decoding.decode(tiny_llama, prompt, beam, 12)
        assert torch.equal(ours, hf(tiny_llama, prompt, beam, 12))
    # and it is a search: it finds a continuation at least as likely as greedy's
    prompt = prompts()[0]
    nll_beam, _ = decoding.continuation_nll(tiny_llama, prompt, decoding.decode(tiny_llama, prompt, beam, 12))
    nll_greedy, _ = decoding.continuation_nll(
        tiny_llama, prompt, decoding.decode(tiny_llama, prompt, Strategy("greedy"), 12))
    assert nll_beam <= nll_greedy + 1e-4


def test_filters_equal_the_transformers_processors() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 500, generator=g) * 3
    for k in (1, 5, 50):
        assert torch.equal(decoding.top_k_filter(logits, k), TopKLogitsWarper(k)(None, logits.clone()))
    for p in (0.1, 0.5, 0.9, 0.99):
        ours = decoding.top_p_filter(logits, p)
        assert torch.equal(torch.isinf(ours), torch.isinf(TopPLogitsWarper(p)(None, logits.clone())))


def test_nucleus_keeps_the_smallest_set_reaching_p() -> None:
    logits = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = {p: int(torch.isfinite(decoding.top_p_filter(logits, p)).sum()) for p in (0.4, 0.7, 0.85, 0.99)}
    assert kept == {0.4: 1, 0.7: 2, 0.85: 3, 0.99: 4}
    assert int(torch.isfinite(decoding.top_k_filter(logits, 2)).sum()) == 2


def test_generate_stops_after_end_of_text(tiny_llama: LlamaForCausalLM) -> None:
    prompt = prompts()[0]
    full = decoding.decode(tiny_llama, prompt, Strategy("greedy"), 10)
    stop = int(full[0, 3])
    short = decoding.decode(tiny_llama, prompt, Strategy("greedy"), 10, eos_id=stop)
    first = full[0].tolist().index(stop)
    assert short[0].tolist() == full[0, : first + 1].tolist()


def test_repetition_and_distinct_n_of_known_strings() -> None:
    loop = "the cat the cat the cat".split()  # bigrams: tc ct tc ct tc -> 2 unique of 5
    assert decoding.repetition(loop, 2) == pytest.approx(0.6)
    assert decoding.repetition("a b c d e".split(), 2) == 0.0
    assert math.isnan(decoding.repetition(["a"], 2))
    assert decoding.distinct_n(["a b c".split(), "a b d".split()], 2) == pytest.approx(0.75)
    assert decoding.distinct_n(["a b c".split(), "a b c".split()], 1) == pytest.approx(0.5)


def test_continuation_nll_equals_the_models_own_loss(tiny_llama: LlamaForCausalLM) -> None:
    prompt, cont = prompts()[1], prompts()[2][:, :6]
    nll, n = decoding.continuation_nll(tiny_llama, prompt, cont)
    ids = torch.cat([prompt, cont], dim=1)
    labels = ids.clone()
    labels[:, : prompt.shape[1]] = -100
    with torch.no_grad():
        loss = tiny_llama(input_ids=ids, labels=labels).loss
    assert n == 6 and nll / n == pytest.approx(float(loss), rel=1e-5)


def test_mean_interval() -> None:
    values = [0.1, 0.3, 0.2, 0.4, 0.25, float("nan")]
    t = decoding.mean_interval(values)
    boot = decoding.mean_interval(values, "bootstrap")
    assert t.n == boot.n == 5 and t.mean == pytest.approx(0.25)
    for ci in (t, boot):
        assert ci.low < ci.mean < ci.high
    assert t.low == pytest.approx(0.25 - 2.776 * 0.1118 / math.sqrt(5), abs=1e-3)  # t_{0.975, 4}
    assert decoding.mean_interval([0.5, 0.5]).low == 0.5
    with pytest.raises(ValueError):
        decoding.mean_interval([1.0])


def test_detokenize_undoes_wikitexts_markup() -> None:
    text = " The 1 @,@ 000 @-@ year @-@ old song ( 1999 ) was , he said , 3 @.@ 5 times longer . \n"
    assert decoding.detokenize(text) == "The 1,000-year-old song (1999) was, he said, 3.5 times longer."


class WordIds:
    """A tokenizer stand-in: one id per word (its length)."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [len(w) for w in text.split()]}


def test_text_prompts_cut_long_plain_paragraphs() -> None:
    texts = ["", " = Heading = \n", "a b c", "one two three four five six", "x <unk> y z w v u",
             "aa bb cc dd ee ff gg", "s t u v w x y z"]
    prompts, human = decoding.text_prompts(texts, WordIds(), 3, prompt_tokens=2, continuation_tokens=3)
    assert prompts.shape == (3, 2) and human.shape == (3, 3)
    rows = {tuple(r) for r in torch.cat([prompts, human], 1).tolist()}
    assert rows == {(3, 3, 5, 4, 4), (2, 2, 2, 2, 2), (1, 1, 1, 1, 1)}  # headings, <unk>, short: out
    with pytest.raises(ValueError, match="paragraphs"):
        decoding.text_prompts(texts, WordIds(), 4, prompt_tokens=2, continuation_tokens=3)


def test_hf_generate_in_batches_is_generate_per_prompt(tiny_llama: LlamaForCausalLM) -> None:
    g = torch.Generator().manual_seed(2)
    batch = torch.randint(0, VOCAB, (5, 6), generator=g)
    for strategy in (Strategy("greedy"), Strategy("beam", num_beams=3)):
        out = decoding.hf_generate(tiny_llama, batch, strategy, 7, batch_size=2)
        assert out.shape == (5, 7)
        for prompt, row in zip(batch, out):
            assert torch.equal(row, decoding.decode(tiny_llama, prompt[None], strategy, 7)[0])


def test_text_rows_measure_each_text(tiny_llama: LlamaForCausalLM) -> None:
    prompts = torch.tensor([[1, 2, 3], [4, 5, 6]])
    texts = torch.tensor([[7, 8, 7, 8, 7, 8], [9, 10, 11, 12, 13, 14]])
    rows = decoding.text_rows(tiny_llama, prompts, texts, "x", n=2)
    assert [r["repetition"] for r in rows] == [pytest.approx(0.6), 0.0]
    assert [r["distinct_1"] for r in rows] == [pytest.approx(2 / 6), 1.0]
    nll, k = decoding.continuation_nll(tiny_llama, prompts[1:], texts[1:])
    assert rows[1]["nll"] == pytest.approx(nll / k)
    assert rows[1]["perplexity"] == pytest.approx(math.exp(nll / k))


def test_a_model_without_a_cache_decodes_on_its_history(tiny_llama: LlamaForCausalLM) -> None:
    """Our LM (notebook 01) has no key/value cache: its step re-reads the ids so far. On the tiny
    Llama, which has both, the history step must pick the same tokens as the cached one, for
    sampling and beam search alike."""
    history = decoding.history_forward(tiny_llama)
    for strategy in (Strategy("sample", top_p=0.9), Strategy("beam", num_beams=3)):
        for i, prompt in enumerate(prompts()):
            torch.manual_seed(i)
            cached = decoding.decode(tiny_llama, prompt, strategy, 10)
            torch.manual_seed(i)
            if strategy.num_beams > 1:
                plain = decoding.beam_search(history, prompt, strategy.num_beams, 10)
            else:
                plain = decoding.generate(history, prompt, strategy.picker(), 10)
            assert torch.equal(cached, plain)


def test_our_lm_generates_texts_of_the_asked_length() -> None:
    from tutorial_lib.models import TransformerConfig, TransformerLM

    torch.manual_seed(0)
    ours = TransformerLM(TransformerConfig(vocab_size=VOCAB, d_model=16, n_layer=1, n_head=2, d_ff=32,
                                           max_len=12, dropout=0.0)).eval()
    assert not hasattr(ours, "generate")  # so: our decode on its history, prompt by prompt
    batch = torch.randint(0, VOCAB, (3, 8))
    for strategy in decoding.STRATEGIES.values():
        texts = decoding.generate_texts(ours, batch, strategy, 9)  # 17 > max_len: the last 12 read
        assert texts.shape == (3, 9)
    greedy = decoding.generate_texts(ours, batch, Strategy("greedy"), 9)
    assert torch.equal(greedy[1:2], decoding.decode(ours, batch[1:2], Strategy("greedy"), 9))


def test_the_notebooks_self_check_passes_its_solution_and_catches_an_off_by_one():
    """16's self-check: the learner's top-k filter against the library's (its solution block)."""
    from tutorial_lib import selfcheck

    def random_logits(rng):  # as in the notebook's check cell
        rows, vocab = int(rng.integers(1, 4)), int(rng.integers(5, 60))
        logits = torch.tensor(rng.normal(size=(rows, vocab)), dtype=torch.float32)
        return logits, int(rng.integers(1, vocab + 1))

    def solution(logits, k):
        kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]  # each row's k-th largest
        return logits.masked_fill(logits < kth, float("-inf"))

    def drops_the_kth(logits, k):
        kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
        return logits.masked_fill(logits <= kth, float("-inf"))

    check = lambda mine: selfcheck.check(mine, decoding.top_k_filter, selfcheck.cases(random_logits))  # noqa: E731
    assert check(solution)
    assert not check(drops_the_kth)
