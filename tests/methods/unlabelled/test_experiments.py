"""Notebook 18: The labelled / unlabelled split and the runner's evaluation cadence."""

from tests.tiny import tiny_ours
from tutorial_lib.finetuning import Recipe, run
from tutorial_lib.methods.unlabelled import experiments
from tutorial_lib.settings import Budget

TEST = ["which planet is the largest ?", "why is the sky blue ?"]


def test_per_class_takes_k_of_each_label_and_leaves_the_rest_to_the_pool():
    labels = [0, 1, 2] * 10
    labelled, rest = experiments.per_class(labels, 3, seed=4)
    assert sorted(labels[i] for i in labelled) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert not set(labelled) & set(rest) and len(labelled) + len(rest) == len(labels)
    assert experiments.per_class(labels, 3, seed=4) == (labelled, rest)  # the seed decides
    assert experiments.per_class(labels, 3, seed=5)[0] != labelled


def test_the_runner_evaluates_every_given_number_of_steps():
    model_rows = [{"input_ids": [1, 5, 6, 2], "labels": i % 3} for i in range(8)]
    done = run(Recipe(build=lambda b: b.classifier(3), backbone=tiny_ours(),
                      budget=Budget(batch_size=2), steps=6, rows=lambda b: model_rows,
                      validate=lambda b: (lambda m: {"error": 0.5}), evaluate_every=2), 0)
    assert [e["step"] for e in done.history.evals] == [2, 4, 6]
