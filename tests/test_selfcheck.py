"""Tests for tutorial_lib.selfcheck: a right answer passes, and every kind of wrong answer fails
with a message that says what is wrong (the learner's self-checks rest on it)."""

import numpy as np
import pytest
import torch

from tutorial_lib import selfcheck
from tutorial_lib.heads import reverse_gradient


def _inputs(rng):
    return (torch.tensor(rng.normal(size=(3, 4)), dtype=torch.float32, requires_grad=True), 0.5)


def _reversed_grad(fn):
    """The gradient that ``fn`` (x, λ) ↦ y sends back to x for d(sum y)/dy = 1."""
    def grad(x, lam):
        x = x.detach().clone().requires_grad_(True)
        fn(x, lam).sum().backward()
        return x.grad
    return grad


def test_a_right_answer_passes_on_every_case():
    def mine(x, lam):  # the learner's gradient reversal, written another way
        class Flip(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return -lam * g
        return Flip.apply(x)

    result = selfcheck.check(_reversed_grad(mine), _reversed_grad(reverse_gradient),
                             selfcheck.cases(_inputs, n=4), what="your reversal")
    assert result and result.cases == 4
    assert repr(result) == "✓ your reversal matches the library on 4 random inputs"


@pytest.mark.parametrize("wrong, says", [
    (lambda x, lam: x * 1.0, "largest difference 1.5 "),  # not reversed: +1 instead of −0.5
    (lambda x, lam: -x, "largest difference 0.5"),  # reversed, but without λ
    (lambda x, lam: x[:2] * -lam, "at index (2, 0) (yours 0, reference -0.5)"),  # a row left out
])
def test_a_deliberately_wrong_answer_fails_and_says_what_differs(wrong, says):
    result = selfcheck.check(_reversed_grad(wrong), _reversed_grad(reverse_gradient),
                             selfcheck.cases(_inputs, n=3))
    assert not result and result.cases == 1
    assert says in result.message and result.message.startswith("✗ case 1: ")


def test_a_stub_and_a_crash_are_reported_without_stopping_the_notebook():
    def stub(x, lam):
        raise NotImplementedError

    def crash(x, lam):
        return x @ x  # 3×4 @ 3×4

    ref = _reversed_grad(reverse_gradient)
    assert "not written yet" in selfcheck.check(stub, ref, selfcheck.cases(_inputs)).message
    out = selfcheck.check(_reversed_grad(crash), ref, selfcheck.cases(_inputs))
    assert not out and "raised RuntimeError" in out.message


def test_differences_in_containers_name_the_place_and_the_cases_are_seeded():
    want = {"loss": 1.0, "parts": (np.zeros(3), 2.0)}
    assert selfcheck.difference({"loss": 1.0, "parts": (np.zeros(3), 2.0)}, want) == ""
    assert selfcheck.difference({"loss": 1.0, "parts": (np.ones(3), 2.0)}, want).startswith(
        "['parts']: [0]: largest difference 1 at index (0,)")
    assert "keys" in selfcheck.difference({"loss": 1.0}, want)
    assert selfcheck.difference(np.zeros((2, 4)), np.zeros((3, 4))) == "shape (2, 4), expected (3, 4)"
    a = [x.detach().numpy() for x, _ in selfcheck.cases(_inputs, n=2, seed=3)]
    b = [x.detach().numpy() for x, _ in selfcheck.cases(_inputs, n=2, seed=3)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
