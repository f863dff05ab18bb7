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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO / ".mutation"
PYTEST = "-m pytest -x -q -p no:cacheprovider -p no:randomly"


from mutation_targets import EQUIVALENT, TARGETS, Target  # noqa: E402

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


def _imports_this_checkout(name: str, target: Target) -> None:
    """The tests must import the module cosmic-ray mutates: an editable install made for
    another checkout (a clone run with the worktree's venv) would test the unmutated file
    and count every mutant as a survivor, or, worse, pass a clean-looking score."""
    dotted = "retrylens." + target.module.removesuffix(".py").replace("/", ".")
    probe = f"import importlib.util; print(importlib.util.find_spec({dotted!r}).origin)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    origin = Path(done.stdout.strip()).resolve()
    if origin != (REPO / target.module).resolve():
        sys.exit(f"{name}: the tests would import {origin}, not {REPO / target.module}: "
                 "install this checkout (uv pip install -e .) or point PYTHONPATH at it")


def _baseline(name: str, target: Target) -> None:
    """The tests must pass on the unmutated module, or every mutant would count as killed."""
    _imports_this_checkout(name, target)
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
