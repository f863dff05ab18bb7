"""A model trained from a trace file replaces the one in force only when it is no worse.

Issue 34 asked that a worse retrain never become current unchecked; the store road was held
to that, but ``retrylens train --traces`` still made every model current, and silently
ignored ``--days``/``--start``/``--end``/``--project`` and ``--force``. Planted truth: in a
synthetic world the word "wire" makes a task fail 90 % of the time (else 10 %). A model
trained on 300 such tasks is truly better than one trained on 36 new tasks of the same
world, judged on those 36 tasks, which the first model never saw; a model trained on tasks
whose outcomes are coin flips is truly worse than either on tasks of the world with the word.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.training import train_from_traces
from retrylens.cli.main import app

FILLER = "order parcel refund invoice address account receipt payment transfer delivery status".split()


def _world(path: Path, n: int, seed: int, *, signal: bool = True) -> Path:
    rng = random.Random(seed)
    with path.open("w") as out:
        for i in range(n):
            words = rng.sample(FILLER, 6)
            risky = rng.random() < 0.5
            if risky:
                words.insert(rng.randrange(len(words)), "wire")
            fail_p = (0.9 if risky else 0.1) if signal else 0.5
            out.write(json.dumps({"task_text": "please " + " ".join(words), "source": "synthetic",
                                  "task_key": f"{seed}-{i}",
                                  "outcome": "failure" if rng.random() < fail_p else "success"}) + "\n")
    return path


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("worlds")
    return {"big": _world(root / "big.jsonl", 300, seed=1), "few": _world(root / "few.jsonl", 36, seed=2),
            "noise": _world(root / "noise.jsonl", 300, seed=3, signal=False)}


@pytest.fixture(scope="module")
def good_store(tmp_path_factory, worlds) -> tuple[Path, str, dict]:
    """A model store whose model of coin flips was replaced by one that learnt the word
    (trained once for the module): its root, the current version and the promotion."""
    root = tmp_path_factory.mktemp("good") / "models"
    train_from_traces(worlds["noise"], model_store=ModelStore(root), n_splits=3)
    good = train_from_traces(worlds["big"], model_store=ModelStore(root), n_splits=3)
    return root, str(good.version), good.meta["promotion"]


@pytest.fixture
def store_with_good_model(tmp_path, good_store) -> tuple[ModelStore, str]:
    root, version, _ = good_store
    shutil.copytree(root, tmp_path / "models")
    return ModelStore(tmp_path / "models"), version


def test_a_retrain_on_few_new_tasks_is_kept_as_a_candidate_beside_the_better_model(store_with_good_model, worlds):
    store, good = store_with_good_model
    few = train_from_traces(worlds["few"], model_store=store, n_splits=3)
    promotion = few.meta["promotion"]
    assert promotion["promoted"] is False, promotion
    assert promotion["current_version"] == good and store.current_version() == good
    assert promotion["candidate"]["brier"] > promotion["current"]["brier"]
    assert "out of fold" in promotion["reason"] and "--force" in promotion["reason"]


def test_force_makes_the_worse_retrain_current_and_says_so(store_with_good_model, worlds):
    store, _ = store_with_good_model
    forced = train_from_traces(worlds["few"], model_store=store, n_splits=3, force=True)
    assert forced.meta["promotion"]["promoted"] is True and store.current_version() == forced.version
    assert forced.meta["promotion"]["reason"].startswith("forced although worse")


def test_a_better_model_replaces_one_trained_on_coin_flips(good_store):
    root, version, promotion = good_store
    assert promotion["promoted"] is True and ModelStore(root).current_version() == version == "v0002"
    assert promotion["current_version"] == "v0001"
    assert promotion["candidate"]["brier"] < promotion["current"]["brier"]


@pytest.mark.parametrize("option", [["--days", "3"], ["--start", "2026-01-01T00:00:00"], ["--project", "shop"]])
def test_store_window_options_with_a_trace_file_are_refused(tmp_path, settings, monkeypatch, option):
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(settings.data_dir))
    result = CliRunner().invoke(app, ["train", "--traces", str(_world(tmp_path / "t.jsonl", 30, seed=4)), *option])
    assert result.exit_code == 2, result.output
    assert option[0] in result.output and "trained whole" in result.output
    assert ModelStore(models_dir(settings)).versions() == []
