"""Tests for 17's settings: the held-out task types stay out of training at every scale."""

import pytest

from tutorial_lib import config, tasks
from tutorial_lib.methods.instruction.settings import InstructSettings


@pytest.mark.parametrize("scale", list(config.SCALES))
def test_heldout_tasks_are_never_trained_on_and_every_task_exists(scale):
    s = InstructSettings.at(scale)
    assert not set(s.heldout_tasks) & set(s.train_tasks)
    assert s.single_task in s.train_tasks
    for name in (*s.train_tasks, *s.heldout_tasks):
        tasks.spec(name)  # raises for an unknown task
    assert s.candidates is None or s.candidates >= 2


def test_the_notebook_name_is_its_file():
    assert InstructSettings.notebook == "17_instruction_tuning_and_preferences"
