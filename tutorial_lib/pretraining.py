"""Pretraining a Transformer language model (notebook 01), causal or masked.

``pretrain(scale, "causal")`` runs the whole recipe of the scale's :class:`PretrainingSettings`
(pass ``settings=`` for a recipe of your own): train (or load) the tokenizer, encode the
corpus into one long stream of ids with [SEP] between lines, cut it into blocks of
``seq_len`` tokens, and train with AdamW, warm-up + cosine schedule, bf16 autocast where the
hardware has it, periodic evaluation and atomic, resumable checkpoints: a killed run, re-run,
resumes from its last checkpoint and ends with the weights of a run never killed (the data
order, every RNG state and the history are in the checkpoint; see ``tutorial_lib.training``).
The tokenizer, the encoded corpus and the checkpoints are cached with integrity records: a
damaged file is rebuilt with a warning, never loaded.

The same function is the distributed entry point: under
``torchrun --nproc_per_node=2 -m tutorial_lib.pretraining --scale smoke --objective causal``
``ignite.distributed`` wraps the model in DDP and shards the data; nothing else changes.

Reading list (notebook 01; its model is :class:`tutorial_lib.models.TransformerLM`)
    Vaswani et al. (2017), *Attention Is All You Need* (the Transformer).
    Radford et al. (2018), *Improving Language Understanding by Generative Pre-Training* (GPT: the
    causal LM as a pretraining task); Radford et al. (2019), *Language Models are Unsupervised
    Multitask Learners* (GPT-2: pre-LN blocks and a final LayerNorm, as ours).
    Devlin et al. (2019), *BERT* (the masked LM and its 80/10/10 rule: ``training.mask_tokens``).
    Merity et al. (2016), *Pointer Sentinel Mixture Models* (WikiText-2, the corpus).
    Press & Wolf (2017), *Using the Output Embedding to Improve Language Models* (the tied LM head).
    The NAACL-2019 tutorial (Ruder, Peters, Swayamdipta & Wolf), *Transfer Learning in NLP*: its
    pretraining part and its hands-on code, whose Transformer 01 pretrains (smaller).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.utils import manual_seed
from torch.utils.data import TensorDataset
from transformers import PreTrainedTokenizerBase

from . import integrity
from .checkpoints import (
    checkpoint_and_resume,
    run_to_completion,
)
from .config import Scale, cache_dir, get_scale
from .evaluation import create_lm_evaluator
from .integrity import cache_lock
from .models import CHECKPOINT_FILE, TransformerLM, save_pretrained
from .ours import (  # noqa: F401 (the cache contract, re-exported: notebooks call pretraining.load …)
    HISTORY_FILE,
    OBJECTIVES,
    OURS,
    NotPretrained,
    PretrainError,
    PretrainResult,
    _check_objective,
    _intact,
    corpus_lines,
    get_tokenizer,
    load,
    model_config,
    recipe,
    run_directory,
)
from .params import make_optimizer
from .pretraining_settings import PretrainingSettings
from .runtime import autocast_dtype, device, device_of
from .settings import BACKBONE, Settings, named
from .training import (
    History,
    TrainingOutOfMemory,
    attach_progress,
    attach_schedule,
    create_trainer,
    mask_tokens,
    resumable_loader,
)

# --- corpus and tokenizer --------------------------------------------------------------------------


@dataclass
class EncodedCorpus:
    ids: torch.Tensor  # 1-D stream of token ids, [SEP] after every line
    n_words: int  # whitespace words + one end-of-line per line, as word-level LMs count

    @property
    def words_per_token(self) -> float:
        return self.n_words / len(self.ids)


def unigram_loss(train: EncodedCorpus, valid: EncodedCorpus, vocab_size: int) -> float:
    """Nats per token of the honest floor for a language model: each token's training frequency
    (add-one smoothed), ignoring all context. A vocabulary-sized uniform guess is far worse."""
    counts = torch.bincount(train.ids.long(), minlength=vocab_size).double() + 1.0
    log_p = torch.log(counts / counts.sum())
    return float(-log_p[valid.ids.long()].mean())


def encode_corpus(scale: Scale, tokenizer: PreTrainedTokenizerBase, split: str,
                  settings: PretrainingSettings | None = None) -> EncodedCorpus:
    """Encode a split into one stream (cached next to the tokenizer)."""
    s = recipe(scale, settings)
    path = cache_dir(scale.name) / f"corpus-{s.fingerprint('tok')}-{split}.pt"
    if integrity.check(path, "encoded corpus"):
        blob = torch.load(path, weights_only=True)
        return EncodedCorpus(blob["ids"], int(blob["n_words"]))
    lines = corpus_lines(scale, split, s)
    encoded = tokenizer(lines, add_special_tokens=False)["input_ids"]
    sep = tokenizer.sep_token_id
    stream = [tok for row in encoded for tok in (*row, sep)]
    ids = torch.tensor(stream, dtype=torch.int32)
    n_words = sum(len(ln.split()) + 1 for ln in lines)
    integrity.save_torch({"ids": ids, "n_words": n_words}, path)
    return EncodedCorpus(ids, n_words)


def blocks(ids: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Cut a stream into non-overlapping [n, seq_len] blocks (the ragged tail is dropped)."""
    n = len(ids) // seq_len
    return ids[: n * seq_len].view(n, seq_len).long()


def lm_collate(tokenizer: PreTrainedTokenizerBase, objective: str, mlm_probability: float):
    """Batch of blocks -> {"input_ids", "labels"}; the MLM masks afresh every time it is called."""
    specials = [tokenizer.convert_tokens_to_ids(t) for t in tokenizer.all_special_tokens]

    def collate(rows: list[tuple[torch.Tensor]]) -> dict[str, torch.Tensor]:
        ids = torch.stack([r[0] for r in rows])
        if objective == "causal":
            return {"input_ids": ids, "labels": ids}
        inputs, labels = mask_tokens(
            ids, mask_id=tokenizer.mask_token_id, vocab_size=len(tokenizer),
            special_ids=specials, probability=mlm_probability,
        )
        return {"input_ids": inputs, "labels": labels}

    return collate


def fixed_validation_batches(
    blocks_: torch.Tensor, collate, batch_size: int, seed: int = 1234
) -> list[dict[str, torch.Tensor]]:
    """Validation batches built once with a fixed seed, so MLM masks are identical at every eval."""
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    batches = [collate([(b,) for b in blocks_[i : i + batch_size]])
               for i in range(0, len(blocks_), batch_size)]
    torch.random.set_rng_state(state)
    return batches


def _prepare_corpus(scale: Scale, s: PretrainingSettings
                    ) -> tuple[PreTrainedTokenizerBase, EncodedCorpus, EncodedCorpus]:
    """Tokenizer + encoded splits; under torchrun rank 0 builds the caches while the others wait."""
    distributed = idist.get_world_size() > 1
    if distributed and idist.get_rank() > 0:
        idist.barrier()
    tokenizer = get_tokenizer(scale, s)
    train = encode_corpus(scale, tokenizer, "train", s)
    valid = encode_corpus(scale, tokenizer, "validation", s)
    if distributed and idist.get_rank() == 0:
        idist.barrier()
    return tokenizer, train, valid


# --- the model and the loop ----------------------------------------------------------------------


def pretrain(
    scale: Scale,
    objective: str = "causal",
    *,
    directory: Path | None = None,
    seed: int = 0,
    progress: bool = True,
    settings: PretrainingSettings | None = None,
) -> PretrainResult:
    """Pretrain a ``TransformerLM`` with ``objective`` at ``scale`` (its recipe, or ``settings``);
    save it to ``directory``.

    An interrupted run is resumed from its last checkpoint. A finished run in ``directory`` is
    discarded and trained again (use :func:`load_or_pretrain` to reuse it instead). A single
    process holds the directory's cache lock meanwhile: a notebook loading the model in another
    process waits for the new one instead of finding none.
    """
    _check_objective(objective)
    p = recipe(scale, settings)
    directory = Path(directory or run_directory(scale, objective, p))
    if idist.get_world_size() > 1:  # torchrun: rank 0 cleans, a barrier orders the ranks
        return _pretrain(scale, objective, directory, seed, progress, p)
    with cache_lock(directory):
        return _pretrain(scale, objective, directory, seed, progress, p)


def _pretrain(scale: Scale, objective: str, directory: Path, seed: int, progress: bool,
              p: PretrainingSettings) -> PretrainResult:
    steps = p.steps_for(objective)
    if steps % p.eval_every:
        raise PretrainError(f"scale {scale.name!r}: {objective} steps ({steps}) must be a "
                            f"multiple of eval_every ({p.eval_every})")
    if (directory / CHECKPOINT_FILE).exists() and idist.get_rank() == 0:
        shutil.rmtree(directory)
    if idist.get_world_size() > 1:
        idist.barrier()  # rank 0 has cleaned the directory before anyone reads it
    manual_seed(seed + idist.get_rank())
    tokenizer, train, valid = _prepare_corpus(scale, p)
    collate = lm_collate(tokenizer, objective, p.mlm_probability)

    dev, amp = device(), autocast_dtype()
    model = idist.auto_model(TransformerLM(model_config(scale, tokenizer, objective, p)).to(dev))
    optimizer = idist.auto_optim(make_optimizer(model, p.lr, p.weight_decay))
    world = idist.get_world_size()
    # under torchrun each process takes batch_size / world_size blocks, as idist.auto_dataloader
    # would; the order of the blocks is a function of (seed, pass) only, so a resumed run goes on
    # with the batches the interrupted one had not seen
    loader = resumable_loader(
        TensorDataset(blocks(train.ids, p.seq_len)), seed=seed, shuffle=True, drop_last=True,
        batch_size=p.batch_size // world if p.batch_size >= world else p.batch_size,
        collate_fn=collate, rank=idist.get_rank(), world_size=world, pin_memory=dev.type == "cuda",
    )
    val_batches = fixed_validation_batches(blocks(valid.ids, p.seq_len), collate, p.batch_size)
    val_batches = val_batches[idist.get_rank() :: world]

    trainer = create_trainer(model, optimizer, device=dev, amp_dtype=amp,
                             grad_accum=p.grad_accum, max_norm=p.max_norm)
    total = steps * p.grad_accum
    scheduler = attach_schedule(trainer, optimizer, kind="cosine", lr=p.lr,
                                warmup=p.warmup * p.grad_accum, total=total)
    if progress and idist.get_rank() == 0:
        attach_progress(trainer, f"pretrain {objective}")
    history = History()
    history.attach(trainer, optimizer, grad_accum=p.grad_accum)
    evaluator = create_lm_evaluator(model, device=dev, amp_dtype=amp,
                                    words_per_token=valid.words_per_token)

    # One Ignite epoch = eval_every optimizer steps = eval_every * grad_accum iterations: at its end
    # we evaluate, then checkpoint (the evaluation's row is part of the checkpointed history).
    @trainer.on(Events.EPOCH_COMPLETED)
    def _evaluate(engine: Engine) -> None:
        metrics = evaluator.run(val_batches).metrics
        row = history.log_eval(engine.state.iteration // p.grad_accum, "validation", metrics)
        if idist.get_rank() == 0 and progress:
            print(f"[{objective}] step {row['step']}/{steps}: validation loss {row['loss']:.3f}, "
                  f"ppl {row['ppl']:.1f}", flush=True)

    to_save = {"model": model, "optimizer": optimizer, "trainer": trainer, "scheduler": scheduler,
               "history": history}
    resumed = checkpoint_and_resume(trainer, to_save, directory / "train_state",
                                    event=Events.EPOCH_COMPLETED)
    history_saver = _history_saver(directory, history)
    trainer.add_event_handler(Events.EPOCH_COMPLETED, history_saver)

    start = time.perf_counter()
    eval_every = p.eval_every * p.grad_accum
    try:
        run_to_completion(trainer, loader, epoch_length=eval_every,
                          max_epochs=math.ceil(total / eval_every))
    except TrainingOutOfMemory as err:  # name the settings to lower at this scale
        raise TrainingOutOfMemory(
            f"{err} PretrainingSettings at {scale.name!r} have batch_size={p.batch_size}, "
            f"seq_len={p.seq_len}, grad_accum={p.grad_accum}, model d_model={p.model.d_model}, "
            f"n_layer={p.model.n_layer}.") from err
    seconds = time.perf_counter() - start

    final = history.evals[-1] if history.evals else {}
    plain = getattr(model, "module", model)
    if idist.get_rank() == 0:
        save_pretrained(plain, directory, objective=objective, scale=scale.name,
                        metrics=final, seconds=seconds)
        history_saver(trainer)
    return PretrainResult(plain, tokenizer, directory, history, final, seconds,
                          str(resumed) if resumed else None)


def _history_saver(directory: Path, history: History):
    def save(_: Engine | None = None) -> None:
        if idist.get_rank() != 0:
            return
        blob = json.dumps({"train": history.train, "evals": history.evals})
        integrity.write_with_record(directory / HISTORY_FILE, lambda tmp: tmp.write_text(blob))

    return save


def load_or_pretrain(scale: Scale, objective: str = "causal",
                     settings: PretrainingSettings | None = None) -> PretrainResult:
    """The pretrained LM from the cache, or pretrain one now (so every notebook runs alone)."""
    _check_objective(objective)
    directory = run_directory(scale, objective, settings)
    with cache_lock(directory):  # another process pretraining it: wait, then load
        if not _intact(directory):
            # without model.pt, pretrain() resumes from the run's last checkpoint: when the run
            # had finished, rebuilding the damaged files takes no training at all
            integrity.discard(directory / CHECKPOINT_FILE)
            return pretrain(scale, objective, settings=settings)
        return load(scale, objective, settings)


def ensure(what: Settings | Scale, *names: str) -> dict[str, PretrainResult]:
    """Make sure our models that a notebook's settings (``what``: its backbone fields and
    ``also_needs``, at its scale) or ``names`` ask for are pretrained: loaded from the cache, or
    pretrained now (notebook 01's recipe; minutes at classroom scale, once per scale and cache).
    ``what`` may be a scale, for ``names`` alone. Returns ``{objective: result}``; ``scratch``
    needs only our tokenizer. A notebook that uses our models calls this in its setup, so that
    :func:`tutorial_lib.backbones.load_backbone` only ever loads."""
    settings, scale = (what, what.scale) if isinstance(what, Settings) else (None, what)
    wanted = set(names)
    if settings is not None:
        wanted |= {name for marker, _, name in named(settings) if marker.what == BACKBONE}
        wanted |= set(settings.also_needs.backbones)
    done: dict[str, PretrainResult] = {}
    for name in sorted(wanted & set(OURS)):
        if name == "scratch":
            get_tokenizer(scale)
        elif OURS[name] not in done:
            done[OURS[name]] = load_or_pretrain(scale, OURS[name])
    return done


# --- using the models ---------------------------------------------------------------------------


@torch.no_grad()
def generate(
    model: TransformerLM,
    tokenizer: PreTrainedTokenizerBase,
    prompt: str,
    max_new_tokens: int = 30,
    temperature: float = 0.8,
    top_k: int = 40,
    seed: int = 0,
) -> str:
    """Sample a continuation of ``prompt`` from a causal LM (top-k sampling)."""
    if not model.config.causal:
        raise PretrainError("generate() needs a causal LM; use fill_mask() for a masked LM")
    gen = torch.Generator().manual_seed(seed)  # on the CPU: the same text on any device
    model.eval()
    dev = device_of(model)
    ids = torch.tensor([tokenizer(prompt, add_special_tokens=False)["input_ids"]])
    for _ in range(max_new_tokens):
        logits = model(ids[:, -model.config.max_len :].to(dev)).logits[0, -1].float().cpu() / temperature
        kth = torch.topk(logits, top_k).values[-1]
        probs = torch.softmax(logits.masked_fill(logits < kth, -float("inf")), dim=-1)
        ids = torch.cat([ids, torch.multinomial(probs, 1, generator=gen)[None]], dim=1)
    return tokenizer.decode(ids[0], skip_special_tokens=False)


@torch.no_grad()
def fill_mask(
    model: TransformerLM, tokenizer: PreTrainedTokenizerBase, text: str, top_k: int = 5
) -> list[tuple[str, float]]:
    """The masked LM's ``top_k`` guesses (token, probability) for the single [MASK] in ``text``."""
    if model.config.causal:
        raise PretrainError("fill_mask() needs a masked LM; use generate() for a causal LM")
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    where = (ids[0] == tokenizer.mask_token_id).nonzero()
    if len(where) != 1:
        raise PretrainError(f"text must contain exactly one {tokenizer.mask_token}: {text!r}")
    model.eval()
    logits = model(ids.to(device_of(model))).logits[0, where[0, 0]]
    probs = torch.softmax(logits.float().cpu(), dim=-1)
    top = torch.topk(probs, top_k)
    return [(tokenizer.convert_ids_to_tokens(int(i)), float(p))
            for p, i in zip(top.values, top.indices)]


# --- command line / torchrun entry point ------------------------------------------------------------


def _run(local_rank: int, args: argparse.Namespace) -> None:
    scale = get_scale(args.scale)
    result = pretrain(scale, args.objective,
                      directory=Path(args.out) if args.out else None, progress=False)
    if idist.get_rank() == 0:
        print(json.dumps({"world_size": idist.get_world_size(), "directory": str(result.directory),
                          "metrics": result.metrics, "seconds": round(result.seconds, 1)}))


def dist_backend(environ: Mapping[str, str], gpus: int) -> str:
    """torchrun's backend: NCCL with one GPU per process on this machine, gloo without a GPU; more
    processes than GPUs is one clear error (each process takes the GPU of its local rank: on the
    H200, rank 1 of two failed with "invalid device ordinal")."""
    local = int(environ.get("LOCAL_WORLD_SIZE", "1"))
    if not gpus:
        return "gloo"
    if local > gpus:
        raise PretrainError(f"torchrun started {local} processes on this machine, which has {gpus} "
                            f"GPU(s): one process per GPU (--nproc_per_node={gpus}), or CPU "
                            "processes with CUDA_VISIBLE_DEVICES= (gloo)")
    return "nccl"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default=None, help="smoke | classroom | gpu | paper")
    parser.add_argument("--objective", default="causal", choices=OBJECTIVES)
    parser.add_argument("--out", default=None, help="run directory (default: the cache)")
    args = parser.parse_args(argv)
    backend = None
    if idist.has_native_dist_support and "WORLD_SIZE" in os.environ:
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        backend = dist_backend(os.environ, gpus)
    with idist.Parallel(backend=backend) as parallel:
        parallel.run(_run, args)


if __name__ == "__main__":
    main()
