"""Tests for tutorial_lib.methods.prompts.dart (tiny masked LMs built from configs; no pretraining, no
data)."""

import copy

import pytest
import torch
from tiny import tensors_equal

from tutorial_lib.backbones import Backbone
from tutorial_lib.methods.prompts import dart, fewshot, prompting
from tutorial_lib.models import TransformerConfig, TransformerLM
from tutorial_lib.tokenization import train_wordpiece

LINES = ["It was great . The movie was good and fun .", "It was bad . A terrible cat and a dog ."] * 20
ROWS = [{"text": "The movie was good and fun", "label": 1},
        {"text": "A terrible cat and a dog", "label": 0},
        {"text": "It was fun", "label": 1}]
VERBALIZER = {"negative": "bad", "positive": "good"}
NAMES = ["negative", "positive"]


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(LINES, vocab_size=160)


@pytest.fixture
def mlm(tokenizer):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=32, n_layer=1, n_head=2, d_ff=64,
                            max_len=32, causal=False, dropout=0.0, pad_id=tokenizer.pad_token_id)
    return Backbone("ours-mlm", "masked", tokenizer, TransformerLM(cfg), 32)


def make(mlm, **kwargs):
    ids = prompting.verbalizer_ids(mlm, VERBALIZER, NAMES)
    return dart.DARTClassifier(mlm, "<x> It was [MASK] .", ids, **kwargs)


def batch_of(model, rows=ROWS):
    return prompting.prompt_collate(model.backbone.pad_id)(model.encode(rows))


def test_template_and_label_embeddings_receive_gradients(mlm):
    model = make(mlm, fluency_weight=1.0).train()
    model(**batch_of(model)).loss.backward()
    for p in (model.embedding.template, model.embedding.labels):
        assert p.grad is not None and p.grad.abs().sum() > 0
    assert model.embedding.template.shape[0] == 3  # "It", "was", "." → 3 pseudo tokens


def test_frozen_backbone_stays_fixed_and_prompts_move(mlm):
    model = make(mlm, freeze_backbone=True).train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    groups = model.param_groups(prompt_lr=1e-2)(model, 1e-3, 0.01)
    assert len(groups) == 1 and groups[0]["lr_scale"] == pytest.approx(10)
    opt = torch.optim.AdamW(groups, lr=1e-2)
    for _ in range(2):
        opt.zero_grad()
        model(**batch_of(model)).loss.backward()
        opt.step()
    for name, p in model.named_parameters():
        moved = not tensors_equal(p, before[name])
        is_prompt = any(p is q for q in model.prompt_parameters())
        assert moved == is_prompt, name


def test_fluency_target_is_one_for_the_gold_label_and_zero_otherwise(mlm):
    model = make(mlm, mask_rate=0.3).eval()
    b = batch_of(model)
    labels = b["labels"]  # [1, 0, 1]
    args = (b["input_ids"], b["attention_mask"], b["mask_pos"], b["text_mask"], labels)
    for sampled, want in ((labels.clone(), [1.0, 1.0, 1.0]), (1 - labels, [0.0, 0.0, 0.0]),
                          (torch.tensor([1, 1, 1]), [1.0, 0.0, 1.0])):
        gen = torch.Generator().manual_seed(0)
        loss, info = model.fluency_loss(*args, sampled=sampled, generator=gen)
        assert info["targets"].tolist() == want
        rows = info["positions"].nonzero()[:, 0]
        t, p = torch.tensor(want)[rows], info["p"]
        expected = -(t * p.log() + (1 - t) * (1 - p).log()).mean()
        torch.testing.assert_close(loss, expected, rtol=1e-4, atol=1e-5)
        # only input-text tokens are masked, at least one per row
        assert not (info["positions"] & ~b["text_mask"]).any()
        assert info["positions"].any(1).all()


def test_fluency_pass_puts_the_sampled_label_vector_in_the_mask_slot(mlm):
    model = make(mlm).eval()
    b = batch_of(model)
    seen = []
    handle = model.embedding.register_forward_hook(lambda m, i, o: seen.append(i[0].clone()))
    model.fluency_loss(b["input_ids"], b["attention_mask"], b["mask_pos"], b["text_mask"],
                       b["labels"], sampled=torch.tensor([0, 1, 1]))
    handle.remove()
    slot = seen[-1][torch.arange(3), b["mask_pos"]]
    assert slot.tolist() == model.label_pseudo_ids[torch.tensor([0, 1, 1])].tolist()


def test_dart_starts_as_the_manual_prompt_and_leaves_real_ids_alone(mlm):
    manual = prompting.PromptClassifier(copy.deepcopy(mlm), "<x> It was [MASK] .",
                                        prompting.verbalizer_ids(mlm, VERBALIZER, NAMES)).eval()
    model = make(mlm).eval()
    b, bm = batch_of(model), batch_of(manual)
    assert not tensors_equal(b["input_ids"], bm["input_ids"])  # pseudo ids for the template
    with torch.no_grad():
        got = model(**{k: v for k, v in b.items() if k != "labels"}).logits
        want = manual(**{k: v for k, v in bm.items() if k != "labels"}).logits
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        real = bm["input_ids"]
        torch.testing.assert_close(model.embedding(real), manual.backbone.input_embeddings()(real))


def test_dart_on_a_hugging_face_mlm_with_a_bias(tiny_bert):
    hf, tok = tiny_bert, tiny_bert.tokenizer
    model = dart.DARTClassifier(hf, "<x> It was [MASK] .",
                                prompting.verbalizer_ids(hf, VERBALIZER, NAMES)).train()
    assert model.label_bias is not None and len(model.prompt_parameters()) == 3
    b = batch_of(model)
    assert b["input_ids"][0, 0].item() == tok.cls_token_id
    model(**b).loss.backward()
    assert model.embedding.labels.grad.abs().sum() > 0
    assert model.embedding.template.grad.abs().sum() > 0


def test_nearest_words_start_at_the_initial_words(mlm):
    table = make(mlm).nearest_words(NAMES, k=3)
    assert list(table.index) == ["template 1", "template 2", "template 3", "label negative",
                                 "label positive"]
    assert table.loc["label positive", "started from"] == "good"
    assert table.loc["label positive", "nearest words"].startswith("good (1.00)")
    assert table["cos(start, learned)"].tolist() == pytest.approx([1.0] * 5)


def test_dart_method_trains_a_fresh_copy_in_the_few_shot_loop(mlm):
    from tutorial_lib.tasks import FewShotSplit

    split = FewShotSplit("sst2", 2, 13, train=ROWS[:2] * 2, dev=ROWS[1:], test=ROWS,
                         label_names=NAMES)
    method = dart.dart_method(mlm, {"sst2": "<x> It was [MASK] ."}, {"sst2": VERBALIZER},
                              prompt_lr=1e-2)
    built = method(split)()
    assert isinstance(built.model, dart.DARTClassifier) and built.model.backbone is not mlm
    groups = built.method.param_groups(built.model, 1e-3, 0.01)
    assert groups[-1]["lr_scale"] == pytest.approx(10) and groups[-1]["weight_decay"] == 0.0
    assert {id(p) for p in groups[-1]["params"]} == {id(p) for p in built.model.prompt_parameters()}
    table, kept = fewshot.compare_fewshot({"DART": method}, [split], lrs={"DART": (1e-3,)},
                                          steps=3, batch_size=2, eval_every=3,  # keeps step 3
                                          keep=lambda m, s: True)
    run = kept[("DART", "sst2", 2, 13)]
    start = built.model.embedding.labels.detach()  # an untrained copy: the words' embeddings
    assert not tensors_equal(run.model.embedding.labels.detach(), start)  # the prompts moved
    assert not isinstance(mlm.input_embeddings(), dart.ExtendedEmbedding)  # original untouched
    assert table.iloc[0]["method"] == "DART" and 0 <= table.iloc[0]["test_accuracy"] <= 1


def test_prompt_vectors_train_at_the_runs_rate_by_default(mlm):
    model = make(mlm)
    groups = model.param_groups()(model, 1e-3, 0.01)
    prompt = {id(p) for p in model.prompt_parameters()}
    scales = {g.get("lr_scale", 1.0) for g in groups if {id(p) for p in g["params"]} & prompt}
    assert scales == {1.0}


def test_label_vectors_take_their_own_multiple_of_the_runs_rate(mlm):
    """``label_scale``: the label vectors (and their biases) in a group of their own; the template
    keeps ``prompt_scale``; without it both share one group, as before."""
    model = make(mlm)
    groups = model.param_groups(prompt_scale=100.0, label_scale=1.0)(model, 1e-3, 0.01)
    scale_of = {id(p): g.get("lr_scale", 1.0) for g in groups for p in g["params"]}
    assert scale_of[id(model.embedding.template)] == 100.0
    assert scale_of[id(model.embedding.labels)] == 1.0
    assert sum(id(p) in scale_of for p in model.parameters()) == len(scale_of)  # each once
    together = model.param_groups(prompt_scale=100.0)(model, 1e-3, 0.01)
    assert [g for g in together if g.get("lr_scale") == 100.0][0]["params"][1] is model.embedding.labels


def test_paper_table_puts_each_method_on_one_row():
    out = dart.paper_table(["sst2", "trec"], rename={"DART": "DART-style"})
    assert list(out.index) == ["head fine-tuning", "manual prompt", "P-tuning", "DART-style"]
    assert out.loc["head fine-tuning", "sst2"] == "81.4 ± 3.8 (unverified)"
    assert out.loc["DART-style", "trec"] == "—"


def test_causal_lm_stand_in_reads_the_backbone_once_and_keeps_the_two_pass_loss(tokenizer):
    """The "lm" stand-in (09 before its rebuild): one pass serves the answer slot and the LM loss."""
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=32, n_layer=1, n_head=2, d_ff=64,
                            max_len=32, causal=True, dropout=0.0, pad_id=tokenizer.pad_token_id)
    clm = Backbone("ours-clm", "causal", tokenizer, TransformerLM(cfg), 32)
    ids = prompting.verbalizer_ids(clm, VERBALIZER, NAMES)
    model = dart.DARTClassifier(clm, "<x> It was [MASK]", ids, fluency_weight=0.5,
                                causal_fluency="lm").train()
    b = batch_of(model)
    calls, features = [], clm.features
    object.__setattr__(clm, "features", lambda *a, **k: calls.append(1) or features(*a, **k))
    try:
        one_pass = model(**b).loss
        assert len(calls) == 1
        cls = torch.nn.functional.cross_entropy(
            model.label_scores(model.mask_features(b["input_ids"], b["attention_mask"],
                                                   b["mask_pos"])).float(), b["labels"])
        fluency, _ = model.fluency_loss(b["input_ids"], b["attention_mask"], b["mask_pos"],
                                        b["text_mask"], b["labels"])
    finally:
        object.__setattr__(clm, "features", features)
    assert one_pass.item() == pytest.approx((cls + 0.5 * fluency).item(), rel=1e-5)


def test_causal_dart_style_on_frozen_prefix_equals_the_whole_pass():
    """Template after the text as vectors, "Review:" kept as words: the cached frozen layers give
    the same loss and the same gradients for the template vectors as running the whole LM."""
    from tiny import tiny_llama_backbone

    from tutorial_lib.methods.prompts import prompt_lms

    lm = tiny_llama_backbone(LINES, layers=3)
    template = "Review:<x> It was:[MASK]"
    ids = prompting.verbalizer_ids(lm, VERBALIZER, NAMES)
    out = []
    for frozen in (None, prompt_lms.FrozenPrefix(trainable_layers=1)):
        own = prompting.fresh_copy(lm)
        prompting.freeze_below(own, 1)
        own = prompt_lms.on_frozen_states(own, frozen)
        model = dart.DARTClassifier(own, template, ids, fluency_weight=0.5,
                                    prefix_words=True).train()
        b = batch_of(model)
        torch.manual_seed(0)  # the fluency pass's sampled classes: the same in both
        loss = model(**b).loss
        loss.backward()
        out.append((model, b, loss.item(), model.embedding.template.grad.clone()))
    (plain, b, loss, grad), (cached, b2, cached_loss, cached_grad) = out
    assert tensors_equal(b["input_ids"], b2["input_ids"])
    V = plain.embedding.num_base
    review = lm.literal_ids("Review:", first=True)
    assert b["input_ids"][0, : len(review)].tolist() == review  # the prefix stays words
    assert plain.template_ids[: len(review)] == review and min(plain.template_ids[len(review):]) >= V
    assert plain.embedding.template.shape[0] == len(plain.template_ids) - len(review)
    assert cached_loss == pytest.approx(loss, rel=1e-5)
    torch.testing.assert_close(cached_grad, grad, rtol=1e-4, atol=1e-6)
    assert grad.abs().sum() > 0


def _tiny_clm(tokenizer):
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=len(tokenizer), d_model=32, n_layer=1, n_head=2, d_ff=64,
                            max_len=32, causal=True, dropout=0.0, pad_id=tokenizer.pad_token_id)
    return Backbone("ours-clm", "causal", tokenizer, TransformerLM(cfg), 32)


def test_causal_label_fluency_is_bce_of_the_text_given_the_sampled_label_vector(tokenizer):
    """DART's term on a causal LM, recomputed by hand: e_ỹ first, then the text tokens; each text
    token's probability given e_ỹ and the text before it; BCE against 1[ỹ = y] — the target flips
    with ỹ, and the label vector in front changes the probabilities (the text is conditioned)."""
    clm = _tiny_clm(tokenizer)
    ids = prompting.verbalizer_ids(clm, VERBALIZER, NAMES)
    model = dart.DARTClassifier(clm, "<x> It was [MASK]", ids, causal_fluency="label").eval()
    b = batch_of(model)
    labels = b["labels"]  # [1, 0, 1]
    probs = {}
    for sampled, want in ((labels.clone(), 1.0), (1 - labels, 0.0)):
        loss, info = model.label_fluency(b["input_ids"], b["text_mask"], labels, sampled=sampled)
        assert info["targets"].tolist() == [want] * 3
        by_hand = []
        for r in range(3):
            text = b["input_ids"][r][b["text_mask"][r].bool()]
            seq = torch.cat([model.label_pseudo_ids[sampled[r]].view(1), text])[None]
            h = clm.features(seq, torch.ones_like(seq))[0, :-1]
            log_p = torch.log_softmax((h @ clm.decoder_weight.T).float(), -1)
            by_hand.append(log_p.gather(1, text[:, None]).squeeze(1))
        log_p = torch.cat(by_hand)
        torch.testing.assert_close(info["p"], log_p.exp(), rtol=1e-4, atol=1e-6)
        expected = -(log_p if want else torch.log1p(-log_p.exp())).mean()
        torch.testing.assert_close(loss, expected, rtol=1e-4, atol=1e-6)
        probs[want] = info["p"]
        assert (info["ids"][:, 0] == model.label_pseudo_ids[sampled]).all()
    assert not torch.allclose(probs[1.0], probs[0.0])  # a different label vector, other p


def test_label_fluency_trains_the_label_vectors_through_the_input_side(tokenizer):
    clm = _tiny_clm(tokenizer)
    ids = prompting.verbalizer_ids(clm, VERBALIZER, NAMES)
    model = dart.DARTClassifier(clm, "<x> It was [MASK]", ids, causal_fluency="label").train()
    b = batch_of(model)
    loss, info = model.label_fluency(b["input_ids"], b["text_mask"], b["labels"],
                                     sampled=torch.tensor([0, 0, 0]))
    loss.backward()
    grad = model.embedding.labels.grad
    assert grad[0].abs().sum() > 0 and grad[1].abs().sum() == 0  # only ỹ = 0 was placed
    total = model(**b).loss  # classification + λ·fluency in training mode
    assert torch.isfinite(total)
    with pytest.raises(ValueError, match="causal_fluency"):
        dart.DARTClassifier(_tiny_clm(tokenizer), "<x> It was [MASK]", ids, causal_fluency="x")


def test_vectors_that_never_left_their_words_are_computed_did_not_train(mlm):
    """09's committed DART-style run: cosines above 0.99999 to the start words → "did not train";
    after a few steps at a real rate they move and the guard passes."""
    model = make(mlm, freeze_backbone=True).train()
    start = dart.start_cosines(model)
    assert set(start) == {"template 1", "template 2", "template 3", "label 0", "label 1"}
    assert all(c == pytest.approx(1.0) for c in start.values())
    still = dart.moved_premise(start)
    assert not still.holds and still.failure == "did not train"
    opt = torch.optim.AdamW(model.param_groups(prompt_lr=0.5)(model, 1e-3, 0.0), lr=0.5)
    for _ in range(5):
        opt.zero_grad()
        model(**batch_of(model)).loss.backward()
        opt.step()
    assert dart.moved_premise(dart.start_cosines(model)).holds


def test_label_fluency_on_frozen_states_equals_the_whole_pass():
    """09's setting: DART's fluency pass puts e_ỹ before the text, so nothing of it can be cached;
    on a :class:`~prompt_lms.PromptOnFrozen` decoder (an empty prefix: every row starts with a
    vector) its loss and its gradients for the label vectors equal the whole LM's."""
    from tiny import tiny_llama_backbone

    from tutorial_lib.methods.prompts import prompt_lms

    lm = tiny_llama_backbone(LINES, layers=3)
    ids = prompting.verbalizer_ids(lm, VERBALIZER, NAMES)
    out = []
    for frozen in (None, prompt_lms.FrozenPrefix(trainable_layers=1)):
        own = prompting.fresh_copy(lm, trainable_layers=1)
        prompting.freeze_below(own, 1)
        own = prompt_lms.on_frozen_states(own, frozen)
        model = dart.DARTClassifier(own, "Review:<x> It was:[MASK]", ids, prefix_words=True,
                                    causal_fluency="label").train()
        b = batch_of(model)
        loss, info = model.label_fluency(b["input_ids"], b["text_mask"], b["labels"],
                                         sampled=torch.tensor([1, 1, 0]))
        loss.backward()
        out.append((loss.item(), model.embedding.labels.grad.clone()))
    (loss, grad), (cached_loss, cached_grad) = out
    assert cached_loss == pytest.approx(loss, rel=1e-5)
    torch.testing.assert_close(cached_grad, grad, rtol=1e-4, atol=1e-6)
    assert grad.abs().sum() > 0


def test_the_ablations_keep_their_fixed_part_at_its_words(tokenizer):
    """Template fixed to words / label words fixed: that part gets no optimizer group and never
    moves, the other part trains; start_cosines reads only what trains."""
    clm = _tiny_clm(tokenizer)
    ids = prompting.verbalizer_ids(clm, VERBALIZER, NAMES)
    for fixed in ("template", "labels"):
        model = dart.DARTClassifier(copy.deepcopy(clm), "<x> It was [MASK]", ids,
                                    train_template=fixed != "template",
                                    train_labels=fixed != "labels").train()
        still = getattr(model.embedding, fixed).detach().clone()
        moving = "labels" if fixed == "template" else "template"
        start = getattr(model.embedding, moving).detach().clone()
        groups = model.param_groups(prompt_scale=100.0)(model, 1e-3, 0.01)
        in_groups = {id(p) for g in groups for p in g["params"]}
        assert id(getattr(model.embedding, fixed)) not in in_groups
        assert id(getattr(model.embedding, moving)) in in_groups
        assert [g["lr_scale"] for g in groups if g.get("lr_scale") == 100.0]  # the vectors' group
        opt = torch.optim.AdamW([{k: v for k, v in g.items() if k != "lr_scale"} for g in groups],
                                lr=0.05)
        for _ in range(3):
            opt.zero_grad()
            model(**batch_of(model)).loss.backward()
            opt.step()
        assert tensors_equal(getattr(model.embedding, fixed), still)
        assert not tensors_equal(getattr(model.embedding, moving), start)
        cos = dart.start_cosines(model)
        assert all(k.startswith(moving[:5]) for k in cos)
        assert set(dart.start_cosines(model, trained_only=False)) > set(cos)
    with pytest.raises(ValueError, match="not both"):
        model.param_groups(prompt_lr=1e-3, prompt_scale=10.0)


def test_notebook_09s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_losses():
    """Notebook 09's self-check, run as the learner would: the stub is reported, the solution passes,
    and three plausible mistakes fail (the sum over tokens instead of the mean; log(1 − log p), the
    log-probability taken for a probability; the sign of the BCE dropped)."""
    from notebook_selfcheck import LearnerRun

    run = LearnerRun("09_dart", {"torch": torch, "dart": dart}, "my_fluency_bce", "random_tokens",
                     dart.fluency_bce)

    def terms(log_p, sampled, labels, rows, log_q=None):
        t = (sampled == labels).float()[rows]
        return t * log_p + (1 - t) * (torch.log(1 - log_p.exp()) if log_q is None else log_q)

    wrong = {"sum": lambda lp, s, y, r: -terms(lp, s, y, r).sum(),
             "log(1 - log p)": lambda lp, s, y, r: -terms(lp, s, y, r, torch.log(1 - lp)).mean(),
             "no minus": lambda lp, s, y, r: terms(lp, s, y, r).mean()}
    assert run.check(lambda lp, s, y, r: -terms(lp, s, y, r).mean())  # the frame is right
    run.fails(wrong)
