"""benchmarks/model_holdout.py's comparison of the model with a repeat of the measurement
(issue 48): both ranked against the same half of each configuration's runs."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from scrtune.study.runs import RunTimes

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "benchmarks", "model_holdout.py")


@pytest.fixture(scope="module")
def holdout():
    # a dataclass's module must be importable by name while it is defined
    spec = importlib.util.spec_from_file_location("benchmarks_model_holdout", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _times(per_run: dict[str, list[float]]) -> dict[str, list[RunTimes]]:
    return {name: [RunTimes(per_checkpoint_s=[value, value]) for value in values]
            for name, values in per_run.items()}


def test_a_model_that_orders_the_configurations_ranks_with_a_quiet_repeat(holdout):
    """Four configurations 1-4 s, four runs each, a run 1% off: the order the model gives
    and the one a half of the runs gives agree with the rest (every way of taking two runs
    of four: six splits); the model in reverse is ranked -1."""
    times = _times({f"c{k}": [k * (1 + 0.01 * (-1) ** run) for run in range(4)]
                    for k in range(1, 5)})
    right = holdout._against_halves(times, {f"c{k}": float(k) for k in range(1, 5)})
    assert right == {"model_rank": 1.0, "repeat_rank": 1.0, "splits": 6,
                     "class_means_rank": None}
    wrong = holdout._against_halves(times, {f"c{k}": float(-k) for k in range(1, 5)})
    assert wrong["model_rank"] == -1.0 and wrong["repeat_rank"] == 1.0


def test_where_the_runs_disagree_a_repeat_ranks_them_no_better_than_chance(holdout):
    """Configurations of one true time whose runs scatter: a half of the runs orders them no
    better than the model's guess does; the report says so rather than a goal missed."""
    scatter = [[1.0, 1.3, 0.8], [1.2, 0.9, 1.1], [0.9, 1.0, 1.25], [1.1, 1.2, 0.85]]
    times = _times({f"c{k}": runs for k, runs in enumerate(scatter)})
    report = holdout._against_halves(times, {f"c{k}": 1.0 + k for k in range(4)})
    assert report["splits"] == 3
    assert report["repeat_rank"] < 0.5


def test_too_few_runs_or_configurations_give_no_comparison(holdout):
    one_run = _times({"a": [1.0], "b": [2.0], "c": [3.0]})
    assert holdout._against_halves(one_run, {"a": 1.0, "b": 2.0, "c": 3.0}) is None
    two = _times({"a": [1.0, 1.1], "b": [2.0, 2.1]})
    assert holdout._against_halves(two, {"a": 1.0, "b": 2.0}) is None


def test_class_means_rank_what_is_known_of_each_class_and_nothing_within_it(holdout):
    """Two classes of two configurations each (1 and 2 s, 3 and 4 s), four quiet runs each:
    each class's mean from a half ranks the rest as a model right about the classes and
    blind within them would (Spearman's 0.894 with the ties), under a model that also orders
    each class's members (1.0); with one class a configuration, the means are the half."""
    times = _times({f"c{k}": [k * (1 + 0.01 * (-1) ** run) for run in range(4)]
                    for k in range(1, 5)})
    model = {f"c{k}": float(k) for k in range(1, 5)}
    classes = {"c1": ("a",), "c2": ("a",), "c3": ("b",), "c4": ("b",)}
    report = holdout._against_halves(times, model, classes)
    assert report["model_rank"] == 1.0
    assert report["class_means_rank"] == pytest.approx(0.8944, abs=1e-4)
    alone = holdout._against_halves(times, model, {name: (name,) for name in model})
    assert alone["class_means_rank"] == alone["repeat_rank"] == 1.0
