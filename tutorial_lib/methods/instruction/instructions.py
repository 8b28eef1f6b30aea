"""Instruction tuning's data: the labelled tasks we already have, written as instructions.

FLAN (Wei et al. 2022, "Finetuned Language Models Are Zero-Shot Learners") and T0 (Sanh et al.
2022, "Multitask Prompted Training Enables Zero-Shot Task Generalization") fine-tune a language
model on many tasks, each phrased in natural language by several **templates**, and test it
**zero-shot** on task *types* it never saw. Here the mixture is the tutorial's own labelled tasks
(TREC, SST-2, MR, MNLI: :mod:`tutorial_lib.tasks`), 2-3 templates each (:data:`TEMPLATES`); the
held-out types are RTE (entailment), MRPC (paraphrase) and CoLA (grammaticality) — never trained on.

An example is a **prompt** (the instruction with the example's text) and a **response** (the
label's answer word). :func:`render` writes both with the model's own **chat template** (the
ChatML markers SmolLM2-Instruct was trained with: ``<|im_start|>user … <|im_end|>``) and gives
the labels for supervised fine-tuning: the token ids of the response, and -100 (ignored by the
cross-entropy) on every prompt token, so the loss is on the **response only** — the model is
taught to answer, not to write instructions. :func:`show_mask` shows which tokens count.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ... import data, tasks
from ...floors import Floor, majority_floor
from ...models import IGNORE_INDEX

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
          " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\n' }}{% endif %}")
"""The ChatML template, for a tokenizer that has none (a base model's): SmolLM2-Instruct's own
markers, without its default system prompt."""


@dataclass(frozen=True)
class Template:
    """One phrasing of a task: ``text`` with ``{text}`` (one sentence) or ``{a}`` and ``{b}`` (a
    pair), and the answer word of each label id (``answers[label]``)."""

    text: str
    answers: tuple[str, ...]

    def prompt(self, example_text: str) -> str:
        """The instruction for one example (a pair's two sentences are split at
        :data:`tutorial_lib.tasks.SEP`)."""
        if "{a}" in self.text:
            a, b = example_text.split(tasks.SEP, 1)
            return self.text.format(a=a.strip(), b=b.strip())
        return self.text.format(text=example_text.strip())


_TREC = ("abbreviation", "entity", "description", "person", "location", "number")
_TREC_LIST = ", ".join(_TREC)
TEMPLATES: dict[str, tuple[Template, ...]] = {
    "trec": (
        Template(f"What kind of thing does this question ask for? Answer with one word: {_TREC_LIST}."
                 "\n\nQuestion: {text}", _TREC),
        Template("{text}\n\nIs the answer to this question an abbreviation, an entity, a description, a "
                 "person, a location or a number?", _TREC),
        Template(f"Classify the question by the type of its answer ({_TREC_LIST}).\n\n{{text}}", _TREC),
    ),
    "sst2": (
        Template("Review: {text}\n\nIs this movie review positive or negative?", ("negative", "positive")),
        Template("What is the sentiment of the following sentence? Answer positive or negative.\n\n{text}",
                 ("negative", "positive")),
        Template("\"{text}\"\n\nDid the writer like the movie? Answer yes or no.", ("no", "yes")),
    ),
    "mr": (
        Template("{text}\n\nWas this review written by someone who liked the film? Answer yes or no.",
                 ("no", "yes")),
        Template("Decide whether this movie review is positive or negative.\n\nReview: {text}",
                 ("negative", "positive")),
    ),
    "mnli": (
        Template("Premise: {a}\nHypothesis: {b}\n\nDoes the premise entail the hypothesis? Answer yes, "
                 "maybe or no.", ("yes", "maybe", "no")),
        Template("{a}\n\nBased on the text above, is it true that \"{b}\"? Answer yes, maybe or no.",
                 ("yes", "maybe", "no")),
        Template("Read the two sentences and say whether the second follows from the first (entailment),"
                 " contradicts it (contradiction) or neither (neutral).\n\n1. {a}\n2. {b}",
                 ("entailment", "neutral", "contradiction")),
    ),
    # the held-out task types: never in the training mixture
    "rte": (
        Template("{a}\n\nQuestion: does this mean that \"{b}\" is true? Answer yes or no.", ("yes", "no")),
        Template("Premise: {a}\nHypothesis: {b}\n\nDoes the premise entail the hypothesis? Answer yes or "
                 "no.", ("yes", "no")),
    ),
    "mrpc": (
        Template("Sentence 1: {a}\nSentence 2: {b}\n\nDo these two sentences mean the same thing? Answer "
                 "yes or no.", ("no", "yes")),
        Template("\"{a}\"\n\"{b}\"\n\nIs the second sentence a paraphrase of the first? Answer yes or no.",
                 ("no", "yes")),
    ),
    "cola": (
        Template("Is the following sentence grammatically correct English? Answer yes or no.\n\n{text}",
                 ("no", "yes")),
        Template("Sentence: {text}\n\nWould a native speaker accept this sentence as grammatical? Answer "
                 "yes or no.", ("no", "yes")),
    ),
}


@dataclass(frozen=True)
class Example:
    """One instruction: its task, which template, the prompt and the response (the answer)."""

    task: str
    template: int
    prompt: str
    response: str


@dataclass(frozen=True)
class Item:
    """One held-out question: the prompt, its answer options and the index of the right one."""

    task: str
    prompt: str
    options: tuple[str, ...]
    label: int


def clip(text: str, tokenizer: Any, max_tokens: int) -> str:
    """``text`` cut to its first ``max_tokens`` tokens (a pair: each sentence), so that a long
    premise cannot push the question out of the model's input."""
    if tasks.SEP in text:
        return tasks.SEP.join(clip(part, tokenizer, max_tokens) for part in text.split(tasks.SEP, 1))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return text if len(ids) <= max_tokens else tokenizer.decode(ids[:max_tokens])


def mixture(task_names: Sequence[str], per_task: int | None, *, seed: int = 0, tokenizer: Any = None,
            max_tokens: int = 96, split: str = "train") -> list[Example]:
    """``per_task`` examples of each task (a fixed random subset of its ``split``: "train", the
    same for every training seed, or "validation", a dev set the training never sees), each
    written with a template drawn at random (``seed``), shuffled together. With a ``tokenizer``,
    each text is :func:`clip`-ped to ``max_tokens``."""
    if split not in ("train", "validation"):
        raise ValueError(f"split must be 'train' or 'validation', got {split!r}")
    rng = random.Random(seed)
    out = []
    for name in task_names:
        if name not in TEMPLATES:
            raise ValueError(f"no instruction templates for task {name!r}: {sorted(TEMPLATES)}")
        rows = (tasks.load_task(name, train_examples=per_task).train if split == "train"
                else tasks.subsample(tasks.load_task(name).validation, per_task))
        for text, label in zip(data.column(rows, "text"), data.column(rows, "label")):
            k = rng.randrange(len(TEMPLATES[name]))
            template = TEMPLATES[name][k]
            text = clip(text, tokenizer, max_tokens) if tokenizer is not None else text
            out.append(Example(name, k, template.prompt(text), template.answers[label]))
    rng.shuffle(out)
    return out


def balanced(split: Any, n: int | None, num_labels: int, seed: int | None = None) -> Any:
    """``n // num_labels`` rows of every label of ``split`` (a random draw with ``seed``; None:
    the tasks' split seed; ``n`` None: as many of each as the rarest label has), in the split's
    order."""
    labels = np.asarray(data.column(split, "label"))
    per = min(int((labels == c).sum()) for c in range(num_labels))
    per = per if n is None else min(per, n // num_labels)
    rng = np.random.default_rng(tasks.SPLIT_SEED if seed is None else seed)
    keep = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:per] for c in range(num_labels)])
    return split.select(sorted(int(i) for i in keep))


def heldout_items(name: str, n: int | None, *, template: int = 0, tokenizer: Any = None,
                  max_tokens: int = 96, balance: bool = False, seed: int | None = None
                  ) -> tuple[list[Item], Floor]:
    """``n`` questions of task ``name``'s test split (a random subset drawn with ``seed``; None:
    the tasks' fixed subset; ``n`` None: all) written with its ``template``-th template, and the
    task's majority floor on them (the accuracy of always answering the training split's most
    frequent label). ``balance``: as many questions of every label (:func:`balanced`), so the
    majority floor is chance."""
    task = tasks.load_task(name)
    if balance:
        test = balanced(task.test, n, task.num_labels, seed)
    elif seed is None or n is None or n >= len(task.test):
        test = tasks.subsample(task.test, n)
    else:
        test = task.test.shuffle(seed=seed).select(range(n))
    t = TEMPLATES[name][template]
    texts, labels = data.column(test, "text"), data.column(test, "label")
    items = [Item(name, t.prompt(clip(x, tokenizer, max_tokens) if tokenizer is not None else x),
                  t.answers, int(y)) for x, y in zip(texts, labels)]
    floor = majority_floor(data.column(task.train, "label"), labels, what=f"{name} majority class")
    return items, floor


def question_pool(names: Sequence[str], n: int | None, seeds: Sequence[int], *, tokenizer: Any = None,
                  balance: bool = False) -> dict[int, tuple[dict[str, list[Item]], dict[str, Floor]]]:
    """**Disjoint** questions for every seed: ``n`` of each task per seed (None: the whole test
    split shared out), drawn together once with the first seed and dealt out label by label (so
    a balanced draw stays balanced per seed): ``{seed: ({task: items}, {task: majority floor})}``.
    Pooled over the seeds they are ``n · len(seeds)`` different questions — the units of a test
    over items (``premises.above_floor_items``), which sees far more than a test over three
    seeds' means."""
    seeds = list(seeds)
    out: dict[int, tuple[dict[str, list[Item]], dict[str, Floor]]] = {s: ({}, {}) for s in seeds}
    for name in names:
        items, _ = heldout_items(name, None if n is None else n * len(seeds), tokenizer=tokenizer,
                                 balance=balance, seed=seeds[0])
        train_labels = data.column(tasks.load_task(name).train, "label")
        rng = random.Random(seeds[0])
        by_label = [[it for it in items if it.label == c] for c in sorted({it.label for it in items})]
        for group in by_label:
            rng.shuffle(group)
        for k, seed in enumerate(seeds):
            mine = [it for group in by_label for it in group[k::len(seeds)]]
            out[seed][0][name] = mine
            out[seed][1][name] = majority_floor(train_labels, [it.label for it in mine],
                                                what=f"{name} majority class")
    return out


def content_free(name: str, template: int = 0) -> Item:
    """Task ``name``'s question with "N/A" for its text (both sentences of a pair): contextual
    calibration's content-free input (Zhao et al. 2021). What a model answers to it is its prior
    over the answer words — the bias a rank classifier brings to every question."""
    t = TEMPLATES[name][template]
    text = f"N/A{tasks.SEP}N/A" if "{a}" in t.text else "N/A"
    return Item(name, t.prompt(text), t.answers, -1)


# --- the chat template and the loss mask ----------------------------------------------------------


def chat_text(tokenizer: Any, prompt: str | Sequence[Mapping[str, str]], response: str | None = None) -> str:
    """The prompt (and the response) in the tokenizer's chat template; ``response=None``: the
    prompt ending with the assistant's marker, where the model's answer starts. ``prompt``: the
    user's message, or a conversation (``{"role", "content"}`` messages: a system prompt, turns).
    A tokenizer without a template gets :data:`CHATML`."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if response is not None:
        messages.append({"role": "assistant", "content": response})
    template = None if getattr(tokenizer, "chat_template", None) else CHATML
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                         add_generation_prompt=response is None)


def render(tokenizer: Any, prompt: str | Sequence[Mapping[str, str]], response: str,
           max_len: int | None = None) -> dict[str, list[int]]:
    """One example for supervised fine-tuning: ``input_ids`` = the chat-templated prompt and
    response, ``labels`` = the same ids on the response (the answer and the template's end of
    turn) and -100 on every prompt token, so the loss is on the response only. The prompt and the
    rest are tokenised apart, so the boundary is exact; too long for ``max_len``: the prompt loses
    its oldest tokens."""
    before = chat_text(tokenizer, prompt)
    full = chat_text(tokenizer, prompt, response)
    if not full.startswith(before):
        raise ValueError("the chat template does not write the prompt as a prefix of the conversation")
    prompt_ids = tokenizer(before, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer(full[len(before):], add_special_tokens=False)["input_ids"]
    if max_len is not None and len(prompt_ids) + len(response_ids) > max_len:
        prompt_ids = prompt_ids[len(prompt_ids) + len(response_ids) - max_len:]
    return {"input_ids": prompt_ids + response_ids,
            "labels": [IGNORE_INDEX] * len(prompt_ids) + response_ids}


def render_all(tokenizer: Any, examples: Sequence[Example], max_len: int | None = None) -> list[dict]:
    """:func:`render` of every example."""
    return [render(tokenizer, e.prompt, e.response, max_len) for e in examples]


def show_mask(tokenizer: Any, row: dict[str, list[int]]) -> pd.DataFrame:
    """One rendered example as a table, one row per token: the token, and whether the loss
    counts it (its label is the token itself) or ignores it (-100)."""
    return pd.DataFrame({"token": [tokenizer.decode([i]) for i in row["input_ids"]],
                         "in the loss": [y != IGNORE_INDEX for y in row["labels"]]})
