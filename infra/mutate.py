"""Mutation testing of the guarantee modules (``make mutate``; cosmic-ray from PyPI).

Each target names a module, the functions in it that carry a guarantee, and the fast tests
that cover them. For each target the script makes a cosmic-ray session, keeps only the
mutants inside those functions (one replacement per binary-operator site, no ``is``
swaps: see ``_EXCLUDED``), runs the tests against every mutant (cosmic-ray edits the file
in place and restores it), and prints the score and every surviving mutant's diff.

    python infra/mutate.py                 # every target (hours on a busy machine)
    python infra/mutate.py backoff otlp    # the named targets only
    python infra/mutate.py --list          # targets, their functions and tests
    python infra/mutate.py --rerun-survivors backoff   # after adding tests

Sessions are kept in ``.mutation/`` (ignored by git), so an interrupted run resumes where
it stopped. A survivor is either killed by a new test or justified in bench/RESULTS.md
(an equivalent mutant: no test can tell it from the original).
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO / ".mutation"
PYTEST = "-m pytest -x -q -p no:cacheprovider -p no:randomly"


@dataclass(frozen=True)
class Target:
    module: str
    functions: tuple[str, ...]
    tests: tuple[str, ...]


TARGETS: dict[str, Target] = {
    "sanitizer": Target(
        "sdk/sanitizer.py",
        ("_luhn_ok", "_card", "redact", "_redact", "_status_type", "_classify_type", "classify"),
        ("tests/sdk/test_sdk_redaction.py", "tests/sdk/test_sdk_stories.py"),
    ),
    "cards": Target(  # the card-number part of the sanitizer alone (issue 23)
        "sdk/sanitizer.py",
        ("_luhn_ok", "_card"),
        ("tests/sdk/test_sdk_redaction.py",),
    ),
    "personal": Target(
        "sdk/personal.py",
        ("_capitalised", "_capitals", "_kind", "find_names", "_gap", "_name_at", "_redact_names"),
        ("tests/sdk/test_sdk_redaction.py",),
    ),
    "processors": Target(
        "sdk/processors.py",
        ("_clean", "__call__", "_clean_snapshot", "process"),
        ("tests/sdk/test_sdk_redaction.py", "tests/sdk/test_sdk_stories.py"),
    ),
    "backoff": Target(
        "sdk/backoff.py",
        ("__call__", "factor", "wait_from_policy", "default_wait"),
        ("tests/sdk/test_sdk_backoff.py", "tests/sdk/test_rules_params.py"),
    ),
    "batch": Target(
        "ingest/batch.py",
        ("add", "is_due", "seconds_left", "dedup_token"),
        (
            "tests/foundation/test_ingest_partitions.py::test_two_spool_segments_with_the_same_offsets_are_both_stored",
            "tests/foundation/test_batch_replay.py",
            "tests/foundation/test_batch_parts.py",
        ),
    ),
    "otlp": Target(
        "api/otlp.py",
        ("classify", "is_operation"),
        ("tests/api/test_otlp_status_codes.py", "tests/api/test_otlp.py"),
    ),
    "budget": Target(  # the task ledger, the stop-reason mapping, the retry throttle (issue 24)
        "sdk/budget.py",
        (
            "charge",
            "complete_step",
            "retries",
            "exhausted",
            "stopping_budget",
            "record",
            "allows_retry",
        ),
        (
            "tests/sdk/test_budget_guarantees.py",
            "tests/sdk/test_budget_steps.py",
            "tests/sdk/test_sdk_promises.py",
        ),
    ),
    "allowance": Target(  # the step allowance's formula and its policy fields (issue 24)
        "sdk/policy.py",
        ("_fixed_attempts", "_ceiling_above_base", "allowance", "most_attempts", "steps_allowance"),
        ("tests/sdk/test_budget_steps.py", "tests/sdk/test_budget_guarantees.py"),
    ),
    "effects": Target(  # the side-effect protocol: repeat, verify, hand off (issue 20)
        "sdk/effects.py",
        ("has_contract", "effect", "_verify", "_committed", "pay_debts", "_name", "accepts"),
        (
            "tests/sdk/test_effects_guarantees.py",
            "tests/sdk/test_sdk_safe_defaults.py",
            "tests/sdk/test_sdk_promises.py",
            "tests/sdk/test_sdk_loop.py",
            "tests/sdk/test_sdk_loop_defects.py",
            "tests/sdk/test_sdk_crash_resume.py",
        ),
    ),
    "processor": Target(
        "ingest/processor.py",
        (
            "derived_event_id",
            "_sent_without_event_id",
            "process",
            "validate",
            "_with_event_id",
            "_invalid",
        ),
        ("tests/foundation/test_processor.py", "tests/foundation/test_ingest_boundaries.py"),
    ),
}

#: Mutants not generated: all but one replacement of each binary operator (a site a test
#: pins down fails for every replacement alike) and swaps to or from ``is``/``is not``
#: with an ordering (a TypeError on the first call, never a subtle survivor).
_KEEP_BINARY = {
    "Add": "Sub",
    "Sub": "Add",
    "Mul": "Div",
    "Div": "Mul",
    "FloorDiv": "Mul",
    "Mod": "Add",
    "Pow": "Mul",
    "BitOr": "BitAnd",
    "BitAnd": "BitOr",
    "BitXor": "BitOr",
    "LShift": "RShift",
    "RShift": "LShift",
}
_EXCLUDED = re.compile(
    r"core/ReplaceComparisonOperator_(Is|IsNot)_(Lt|LtE|Gt|GtE)$"
    r"|core/ReplaceComparisonOperator_(Lt|LtE|Gt|GtE)_(Is|IsNot)$"
)


#: Survivors no test can kill, each with the reason: (module, function, operator, the
#: mutated line as cosmic-ray writes it, stripped) -> why it behaves as the original does.
EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    (
        "sdk/backoff.py",
        "factor",
        "core/ReplaceBinaryOperator_Add_Sub",
        "return 1.0 - self.share * (2.0 * rng.random() - 1.0) if self.share else 1.0",
    ): "2r-1 is uniform on [-1, 1], symmetric about 0: 1-share*(2r-1) has the same "
    "distribution as 1+share*(2r-1); only one seeded draw differs, not the policy",
    (
        "ingest/batch.py",
        "add",
        "core/NumberReplacer",
        "self.spans[slot] = (first, last) if known is None else (min(known[0], first), max(known[ 0], last))",
    ): "max(known[0], last) for max(known[1], last): a partition's chunks are added in order "
    "(add's precondition), so both are the new chunk's last offset",
    (
        "ingest/batch.py",
        "add",
        "core/ReplaceComparisonOperator_Is_Eq",
        "index for index, message in encoded.invalid if message.reason == "
        "InvalidReason.PROJECT_NOT_BOUND_TO_TOPIC",
    ): "an enum member equals only itself: == and is agree on InvalidReason",
    (
        "sdk/sanitizer.py",
        "_luhn_ok",
        "core/ReplaceComparisonOperator_Eq_Is",
        "if i % 2 is parity:",
    ): "0 and 1 are cached int objects in CPython: `is` and `==` agree on them",
    (
        "sdk/sanitizer.py",
        "_luhn_ok",
        "core/ReplaceComparisonOperator_Eq_LtE",
        "return total % 10 <= 0",
    ): "a remainder modulo 10 is never negative: <= 0 is == 0",
    (
        "sdk/budget.py",
        "exhausted",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def exhausted(self, budget: TaskBudget, now: float) -> str & None:",
    ): "a return annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/budget.py",
        "stopping_budget",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def stopping_budget(reason: str) -> str & None:",
    ): "a return annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceComparisonOperator_Is_Eq",
        "ambiguous = isinstance(exc, Exception) and classify(exc).error_type == ErrorType.TIMEOUT",
    ): "an enum member equals only itself: == and is agree on ErrorType",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceComparisonOperator_Is_Eq",
        "if record.status == SideEffectStatus.COMMITTED:",
    ): "an enum member equals only itself: == and is agree on SideEffectStatus",
    (
        "sdk/effects.py",
        "_verify",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "error: BaseException & None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import "
    "annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "rollback: Callable[..., object] & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import "
    "annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "key: str & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import "
    "annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "verify: Callable[..., object] & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import "
    "annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "step: str & None = None,",
    ): "a parameter annotation, never evaluated (the module has `from __future__ import "
    "annotations`)",
    (
        "sdk/effects.py",
        "effect",
        "core/ReplaceBinaryOperator_Mul_Div",
        "/,",
    ): "the keyword-only marker as a positional-only one: the one caller (TaskRun.effect) "
    "passes the five leading arguments by position and every option by keyword",
    (
        "sdk/effects.py",
        "_name",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _name(fn: Callable[..., object] & None) -> str | None:",
    ): "an annotation, never evaluated (the module has `from __future__ import annotations`)",
    (
        "sdk/effects.py",
        "_name",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def _name(fn: Callable[..., object] | None) -> str & None:",
    ): "an annotation, never evaluated (the module has `from __future__ import annotations`)",
}


def _equivalence(module: str, function: str, operator: str, diff: str) -> str | None:
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+")]
    added = [line for line in added if line and not line.startswith("++")]
    return next(
        (
            why
            for (m, f, o, text), why in EQUIVALENT.items()
            if (m, f, o) == (module, function, operator) and text in added
        ),
        None,
    )


def _excluded(operator: str) -> bool:
    binary = re.fullmatch(r"core/ReplaceBinaryOperator_(\w+?)_(\w+)", operator)
    if binary:
        return _KEEP_BINARY.get(binary.group(1)) != binary.group(2)
    return bool(_EXCLUDED.match(operator))


def _config(name: str, target: Target, timeout_s: float) -> Path:
    SESSIONS.mkdir(exist_ok=True)
    config = SESSIONS / f"{name}.toml"
    tests = " ".join(target.tests)
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{target.module}"\n'
        f"timeout = {timeout_s}\n"
        "excluded-modules = []\n"
        f'test-command = "{sys.executable} {PYTEST} {tests}"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    return config


def _prune(session: Path, target: Target) -> tuple[int, int]:
    """Mark mutants outside the target's functions, or of excluded operators, skipped."""
    db = sqlite3.connect(session)
    rows = db.execute(
        "SELECT s.job_id, s.operator_name, s.definition_name FROM mutation_specs s "
        "LEFT JOIN work_results r ON r.job_id = s.job_id WHERE r.job_id IS NULL"
    ).fetchall()
    skipped = [
        (job,)
        for job, operator, function in rows
        if function not in target.functions or _excluded(operator)
    ]
    db.executemany(
        "INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
        "VALUES ('SKIPPED', 'outside the guarantee or excluded operator', NULL, NULL, ?)",
        skipped,
    )
    db.commit()
    return len(rows) - len(skipped), len(skipped)


def score(session: Path) -> dict[str, object]:
    """Killed, survived and timed-out mutants of a session, and its survivors' diffs."""
    db = sqlite3.connect(session)
    rows = db.execute(
        "SELECT r.test_outcome, r.worker_outcome, r.diff, s.definition_name, s.start_pos_row, "
        "s.module_path, s.operator_name "
        "FROM work_results r JOIN mutation_specs s ON s.job_id = r.job_id "
        "WHERE r.worker_outcome != 'SKIPPED'"
    ).fetchall()
    pending = db.execute(
        "SELECT count(*) FROM work_items w LEFT JOIN work_results r ON r.job_id = w.job_id "
        "WHERE r.job_id IS NULL"
    ).fetchone()[0]
    killed = sum(1 for t, w, *_ in rows if t == "KILLED" or w == "TIMEOUT")
    survivors, equivalent = [], []
    for t, _w, diff, f, line, module, operator in rows:
        if t != "SURVIVED":
            continue
        why = _equivalence(module, f, operator, diff or "")
        (equivalent if why else survivors).append((f, line, why or diff))
    return {
        "mutants": len(rows),
        "killed": killed,
        "survived": len(survivors),
        "equivalent": equivalent,
        "pending": pending,
        "survivors": survivors,
    }


def _baseline(name: str, target: Target) -> None:
    """The tests must pass on the unmutated module, or every mutant would count as killed."""
    command = [sys.executable, *PYTEST.split(), *target.tests]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(
            f"{name}: the tests fail without any mutant; fix them first\n{done.stdout[-2000:]}"
        )


def _forget_survivors(session: Path) -> int:
    """Drop the survivors' results so that ``exec`` runs them again (after new tests)."""
    db = sqlite3.connect(session)
    gone = db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'").rowcount
    db.commit()
    return gone


def run(name: str, timeout_s: float, *, rerun_survivors: bool = False) -> None:
    target = TARGETS[name]
    session = SESSIONS / f"{name}.sqlite"
    config = _config(name, target, timeout_s)
    cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
    _baseline(name, target)
    if rerun_survivors and session.exists():
        print(f"{name}: {_forget_survivors(session)} survivors to run again")
    if not session.exists():
        subprocess.run([*cosmic, "init", str(config), str(session)], cwd=REPO, check=True)
        kept, skipped = _prune(session, target)
        print(f"{name}: {kept} mutants in {', '.join(target.functions)} ({skipped} skipped)")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    subprocess.run([*cosmic, "exec", str(config), str(session)], cwd=REPO, check=True, env=env)
    result = score(session)
    killed, equivalent = result["killed"], result["equivalent"]
    scored = result["mutants"] - len(equivalent)  # type: ignore[arg-type, operator]
    share = f"{killed / scored:.1%}" if scored else "n/a"  # type: ignore[operator]
    print(
        f"{name}: {killed}/{scored} killed ({share}), {result['survived']} survived, "
        f"{len(equivalent)} equivalent, {result['pending']} pending"  # type: ignore[arg-type]
    )
    for function, line, why in equivalent:  # type: ignore[union-attr]
        print(f"--- equivalent in {function} (line {line + 1}): {why}")
    for function, line, diff in result["survivors"]:  # type: ignore[union-attr]
        print(f"--- survivor in {function} (line {line + 1})\n{diff}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help=f"some of: {', '.join(TARGETS)}")
    parser.add_argument("--list", action="store_true", help="show the targets and stop")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test run")
    parser.add_argument(
        "--rerun-survivors",
        action="store_true",
        help="run the survivors of a kept session again (after adding tests)",
    )
    args = parser.parse_args()
    if args.list:
        for name, t in TARGETS.items():
            print(
                f"{name:11} {t.module}: {', '.join(t.functions)}\n{'':11} tests: {' '.join(t.tests)}"
            )
        return
    unknown = [t for t in args.targets if t not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {unknown}; choose from {', '.join(TARGETS)}")
    for name in args.targets or list(TARGETS):
        run(name, args.timeout, rerun_survivors=args.rerun_survivors)


if __name__ == "__main__":
    main()
