"""Mutation targets of the modules issue 38 named: the spool and the emitter, OTLP decoding,
advice effects, the pre-check log and monitor, and replay's limits and history.

Each lists the narrowest fast tests that pin its guarantee (the full-disk ones mount a real
tmpfs: they need root, as the project's machine and CI have).
"""

from __future__ import annotations

from .target import Equivalent, Target

_EMITTER = "tests/foundation/test_emitter.py"

TARGETS: dict[str, Target] = {
    "spool": Target(
        "sdk/transport/spool.py",
        ("_open_tail", "append", "_roll_back", "_rotate", "read", "commit", "committed", "_write_all",
         "_valid_length"),
        ("tests/foundation/test_spool.py", "tests/foundation/test_spool_full_disk.py"),
    ),
    "emitter": Target(
        "sdk/transport/emitter.py",
        ("_overflow", "_route", "_to_spool", "_deliver", "_drain_spool"),
        (
            _EMITTER,
            "--deselect", f"{_EMITTER}::test_embedded_mode_spools_then_the_ingestor_stores_each_event_once",
            "--deselect", f"{_EMITTER}::test_kafka_fallback_spools_are_left_to_their_own_emitter",
            "tests/foundation/test_emitter_full_disk.py",
            "tests/foundation/test_emitter_pacing.py",
        ),
    ),
    "advice_effects": Target(
        "analytics/advice_effects.py",
        ("_diff", "_wilson", "_diff_rates", "verdict", "measure"),
        ("tests/analytics/test_advice_effect_figures.py", "tests/analytics/test_advice_effect_cost.py",
         "tests/analytics/test_advice_effect_intervals.py"),
    ),
    "otlp_decode": Target(
        "api/otlp_decode.py",
        ("decode", "_from_protobuf", "_from_json", "_json_span", "_hex_id", "_pb_id", "_uint", "_exception"),
        (
            "tests/api/test_otlp_decode_exact.py",  # pure, under a second: most mutants stop here (-x)
            "tests/api/test_otlp_delivery_guarantees.py",
            "tests/api/test_otlp_status_codes.py",
            "tests/api/test_otlp.py::test_otlp_json_a_failed_last_attempt_is_an_inferred_give_up",
            "tests/api/test_otlp.py::test_bad_otlp_input_gets_a_clear_4xx",
        ),
    ),
    "precheck_log": Target(
        "api/precheck_log.py",
        ("add", "flush", "close"),
        ("tests/api/test_api_precheck_log.py",),
    ),
    # The monitor's figures apart from its store road: auc's loops make many mutants loop
    # forever, so they are judged by the pure tests (run with --timeout 20), not the chDB ones.
    "precheck_figures": Target(
        "analytics/prechecks.py",
        ("auc", "judge"),
        ("tests/analytics/test_precheck_figures_exact.py",),
    ),
    "precheck_monitor": Target(
        "analytics/prechecks.py",
        ("precheck_measures",),
        ("tests/api/test_api_precheck_monitor.py",),
    ),
    "replay_limits": Target(
        "evaluation/limits.py",
        ("attempt_limit",),
        ("tests/evaluation/test_replay_planted_budgets.py", "tests/evaluation/test_eval_budget_steps.py"),
    ),
    "replay_history": Target(
        "evaluation/history.py",
        ("build_history",),
        # The exact arrays first (2 s): with -x most mutants stop there.
        ("tests/evaluation/test_history_arrays.py", "tests/evaluation/test_replay_planted_budgets.py", "tests/evaluation/test_eval_budget_steps.py",
         "tests/evaluation/test_eval_replay.py"),
    ),
}

_SPOOL = "sdk/transport/spool.py"
_FSYNC = ("whether fsync ran: the bytes are in the page cache either way, so only an OS crash or a power"
          " loss could tell, which no test can stage (the spool's process-crash cases are tested)")
_OWN_LENGTH = ("the valid length is a prefix of the file, so the file is never shorter: !=, >, >= and `is not`"
               " differ only by truncating a file to its own length, which changes nothing")
_NEVER_PAST = "records grow one at a time and the loop stops at max_records, so the count never passes it"
_LAST_TAIL = ("a frame cut short can only be the last segment's tail (a failed append is rolled back before a"
              " rotation, and a reader lists the segments once), so stopping or going on to a later segment"
              " after it come to the same records")
_POSITIONAL = "the keyword-only `*` as `/`: every caller passes the first argument by position and the rest by keyword"
_ANNOTATION = "an annotation: the module has `from __future__ import annotations`, so it is a string never evaluated"

_HISTORY = "evaluation/history.py"
_PRECHECKS = "analytics/prechecks.py"
_DISCARDED = ("np.where keeps `explored` only where it is not NA: the value NAs are filled with is"
              " discarded, whichever it is")
_NEVER_NULL = ("backoff_ms is never null: a non-null UInt32 in the store, an int defaulting to 0 on the"
               " event; a row without a decision joined is `none`, a stop, so not `retried` and its wait is 0")
_ATTEMPTS_ONLY = ("`att` holds attempt_failed and attempt_succeeded rows only (isin above), and"
                  " attempt_succeeded sorts after attempt_failed: <= is ==")
_ENDED = ("a task_finished event always carries an outcome (the event's validator refuses one without),"
          " so the outcome term alone marks it; the frame holds no kind sorting after task_finished"
          " (task_started is not read)")

EQUIVALENT: Equivalent = {
    **{
        (_HISTORY, "build_history", op, f"greedy = np.where(explored.notna(), explored.fillna({fill}).astype(int), decision)"):
            _DISCARDED
        for op, fill in (("core/ReplaceUnaryOperator_USub_Invert", "~1"), ("core/ReplaceUnaryOperator_Delete_USub", "1"),
                         ("core/NumberReplacer", "- 2"), ("core/NumberReplacer", "- 0"),
                         ("core/ReplaceUnaryOperator_USub_UAdd", "+1"))
    },
    **{
        (_HISTORY, "build_history", "core/NumberReplacer",
         f'backoff = np.where(retried, pd.to_numeric(att["backoff_ms"]).fillna({fill}).to_numpy(dtype=np.float64), 0.0)'):
            _NEVER_NULL
        for fill in (" -1", " 1")
    },
    (_HISTORY, "build_history", "core/ReplaceComparisonOperator_Eq_LtE",
     'failed = (att["kind"] <= "attempt_failed").to_numpy()'): _ATTEMPTS_ONLY,
    **{
        (_HISTORY, "build_history", op,
         f'ended = (frame["kind"] {cmp} "task_finished") | (frame["outcome"].fillna("").astype(str) != "")'): _ENDED
        for op, cmp in (("core/ReplaceComparisonOperator_Eq_Gt", ">"), ("core/ReplaceComparisonOperator_Eq_GtE", ">="),
                        ("core/ReplaceComparisonOperator_Eq_Is", "is"))
    },
    (_HISTORY, "build_history", "core/ReplaceComparisonOperator_NotEq_Gt",
     'ended = (frame["kind"] == "task_finished") | (frame["outcome"].fillna("").astype(str) > "")'):
        'every non-empty string sorts after "": > "" is != ""',
    (_HISTORY, "build_history", "core/ReplaceTrueWithFalse",
     'att = att.sort_values(["key", "attempt"], kind="stable").reset_index(drop=False)'):
        "the old index kept as a column named `index` that nothing reads; the new index is 0..n-1 either way",
    (_HISTORY, "build_history", "core/ReplaceComparisonOperator_Eq_GtE",
     'succeeded=outcome >= "succeeded", handed_off=outcome == "handed_off",'):
        'the outcomes are succeeded, failed, handed_off and cancelled: none sorts after "succeeded"',
    (_PRECHECKS, "precheck_measures", "core/ReplaceBinaryOperator_Mul_Div",
     "def precheck_measures(store: EventStore, /, project: str | None, agent: str | None, start: datetime,"):
        "both callers (alerts.evaluate_rule, a test) pass the store by position and the rest by name: the same calls",
    (_PRECHECKS, "precheck_measures", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def precheck_measures(store: EventStore, *, project: str & None, agent: str | None, start: datetime,"): _ANNOTATION,
    (_PRECHECKS, "precheck_measures", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def precheck_measures(store: EventStore, *, project: str | None, agent: str & None, start: datetime,"): _ANNOTATION,
    (_HISTORY, "build_history", "core/ReplaceFalseWithTrue",
     'task_codes, task_keys = pd.factorize(att["key"], sort=True)'):
        "`att` is sorted by key two lines above: codes in order of first appearance are the sorted order",
    (_SPOOL, "append", "core/ReplaceOrWithAnd", "self._unsynced = self._unsynced and not sync"): _FSYNC,
    (_SPOOL, "append", "core/AddNot", "if not sync:"): _FSYNC,
    (_SPOOL, "append", "core/ReplaceTrueWithFalse",
     "def append(self, records: Iterable[tuple[bytes, bytes]], *, sync: bool = False) -> int:"): _FSYNC,
    **{
        (_SPOOL, "_open_tail", op, line): _OWN_LENGTH
        for op, line in (
            ("core/ReplaceComparisonOperator_NotEq_GtE", "if self._file.seek(0, os.SEEK_END) >= valid_end:"),
            ("core/ReplaceComparisonOperator_NotEq_Gt", "if self._file.seek(0, os.SEEK_END) > valid_end:"),
            ("core/ReplaceComparisonOperator_NotEq_IsNot", "if self._file.seek(0, os.SEEK_END) is not valid_end:"),
            ("core/NumberReplacer", "if self._file.seek( 1, os.SEEK_END) != valid_end:"),
        )
    },
    (_SPOOL, "read", "core/ReplaceComparisonOperator_GtE_Eq",
     "if len(records) == max_records or cursor < len(data) or len(data) == _READ_CHUNK:"): _NEVER_PAST,
    (_SPOOL, "read", "core/ReplaceComparisonOperator_GtE_Gt",
     "if len(records) > max_records or cursor < len(data) or len(data) == _READ_CHUNK:"): _NEVER_PAST,
    (_SPOOL, "read", "core/ReplaceComparisonOperator_Lt_NotEq",
     "while len(records) != max_records and cursor + _HEADER.size <= len(data):"): _NEVER_PAST,
    (_SPOOL, "read", "core/ReplaceComparisonOperator_Lt_NotEq",
     "if len(records) >= max_records or cursor != len(data) or len(data) == _READ_CHUNK:"):
        "a frame's end is checked against the data before the cursor moves to it, so the cursor never passes"
        " the data's end: != and < agree",
    (_SPOOL, "read", "core/ReplaceComparisonOperator_Lt_Gt",
     "if len(records) >= max_records or cursor > len(data) or len(data) == _READ_CHUNK:"): _LAST_TAIL,
    (_SPOOL, "read", "core/ReplaceOrWithAnd",
     "if len(records) >= max_records and cursor < len(data) or len(data) == _READ_CHUNK:"): _LAST_TAIL,
    (_SPOOL, "read", "core/NumberReplacer",
     "def read(self, start: SpoolPosition | None = None, *, max_records: int = 4999) -> list[SpoolRecord]:"):
        "a default page size no caller relies on: the ingestor and the emitter pass max_records, has_pending 1",
    (_SPOOL, "read", "core/ReplaceBinaryOperator_Mul_Div",
     "def read(self, start: SpoolPosition | None = None, /, max_records: int = 5000) -> list[SpoolRecord]:"):
        _POSITIONAL,
    (_SPOOL, "read", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def read(self, start: SpoolPosition & None = None, *, max_records: int = 5000) -> list[SpoolRecord]:"):
        _ANNOTATION,
    (_SPOOL, "append", "core/ReplaceBinaryOperator_Mul_Div",
     "def append(self, records: Iterable[tuple[bytes, bytes]], /, sync: bool = True) -> int:"): _POSITIONAL,
    (_SPOOL, "committed", "core/NumberReplacer", "return SpoolPosition(segments[0] if segments else 1, 0)"):
        "where a new spool's numbering starts is arbitrary: readers take segment numbers from the files and"
        " a spool with no segment has no record whose position could disagree",
    (_SPOOL, "_roll_back", "core/ReplaceFalseWithTrue", "self._torn = True"):
        "a flag left set only makes the next append truncate the segment to the length it already has"
        " (one syscall more), which changes no byte",
    (_SPOOL, "append", "core/ReplaceUnaryOperator_Delete_Not", "self._unsynced = self._unsynced or  sync"): _FSYNC,
    (_SPOOL, "read", "core/NumberReplacer",
     "def read(self, start: SpoolPosition | None = None, *, max_records: int = 5001) -> list[SpoolRecord]:"):
        "a default page size no caller relies on: the ingestor and the emitter pass max_records, has_pending 1",
    (_SPOOL, "read", "core/ReplaceComparisonOperator_Eq_LtE",
     "offset = position.offset if segment <= position.segment else 0"):
        "only the start's segment and later ones are read, so <= holds exactly when == does",
    (_SPOOL, "read", "core/ReplaceComparisonOperator_Eq_GtE",
     "if len(records) >= max_records or cursor < len(data) or len(data) >= _READ_CHUNK:"):
        "a read of _READ_CHUNK bytes never returns more, so >= and == agree",
    (_SPOOL, "commit", "core/ReplaceTrueWithFalse", "self._segment_path(segment).unlink(missing_ok=False)"):
        "it unlinks segments it has just listed, and with one reader at a time nothing else removes them",
    (_SPOOL, "_rotate", "core/NumberReplacer",
     "self._file, self._segment, self._good_end = following, self._segment + 2, 0"):
        "segment numbers only have to increase: readers list the files in order, and a gap is never read",
    (_SPOOL, "_rotate", "core/NumberReplacer",
     'following = open(self._segment_path(self._segment + 2), "ab", buffering=0)  # noqa: SIM115'):
        "segment numbers only have to increase: readers list the files in order, and a gap is never read",
    ("analytics/advice_effects.py", "measure", "core/ReplaceComparisonOperator_Eq_Is",
     'diff = _diff if m is "cost_usd" else _diff_rates  # success, hand-off: yes/no'):
        "m runs over METRICS, literals of this module, and CPython interns identifier-like string constants:"
        " m and 'cost_usd' are one object exactly when they are equal",
    ("analytics/advice_effects.py", "measure", "core/ReplaceComparisonOperator_Eq_GtE",
     '"success": float(r["outcome"] >= "succeeded"),'):
        "a judged row's outcome is a TaskOutcome (succeeded, failed, handed_off, cancelled) and every other"
        " one sorts before 'succeeded', so >= holds exactly when == does",
    ("analytics/advice_effects.py", "verdict", "core/NumberReplacer",
     'if price is not None and c["lo"] > -1 and c["lo"] > s["hi"] * price:'):
        "the rule is reached only when success's upper bound is >= 0 (else the first rule answered), so the"
        " successes' worth s_hi x price is >= 0 and a cost bound above it is above 0 anyway",
    ("analytics/advice_effects.py", "_wilson", "core/NumberReplacer",
     "return max( -1.0, centre - half), min(1.0, centre + half)"):
        "Wilson's score interval lies within [0, 1]: the clamp only absorbs rounding (at a rate of 0 the"
        " lower bound is 0 within ~1e-17), so -1.0 and 0.0 give the same figures to any tolerance",
    ("analytics/advice_effects.py", "_diff", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def _diff(a: list[float], b: list[float]) -> dict[str, float & None]:"): _ANNOTATION,
    ("analytics/advice_effects.py", "_diff_rates", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def _diff_rates(a: list[float], b: list[float]) -> dict[str, float & None]:"): _ANNOTATION,
    **{
        ("analytics/advice_effects.py", "verdict", op, line):
            "the rule is reached only when success's upper bound is >= 0 (else the first rule answered), so"
            " the successes' worth s_hi x price is >= 0 and a cost bound above it is above 0 anyway"
        for op, line in (
            ("core/ReplaceComparisonOperator_Gt_GtE",
             'if price is not None and c["lo"] >= 0 and c["lo"] > s["hi"] * price:'),
            ("core/ReplaceComparisonOperator_Gt_NotEq",
             'if price is not None and c["lo"] != 0 and c["lo"] > s["hi"] * price:'),
        )
    },
    ("analytics/advice_effects.py", "measure", "core/ReplaceComparisonOperator_Eq_LtE",
     'diff = _diff if m <= "cost_usd" else _diff_rates  # success, hand-off: yes/no'):
        "m runs over METRICS (success, cost_usd, handoff) and only cost_usd sorts at or before 'cost_usd'",
    ("analytics/advice_effects.py", "_wilson", "core/NumberReplacer",
     "return max(0.0, centre - half), min( 2.0, centre + half)"):
        "Wilson's score interval lies within [0, 1]: the clamp only absorbs rounding, so 2.0 and 1.0 give the"
        " same figures to any tolerance",
    **{
        ("api/precheck_log.py", "close", op, line):
            "close ends with a flush under the write lock, which waits for a flush in flight: whether it joins"
            " the daemon thread first (or for 9, 10 or 11 s) changes nothing that is stored"
        for op, line in (
            ("core/AddNot", "if not thread is not None:"),
            ("core/ReplaceComparisonOperator_IsNot_Is", "if thread is None:"),
            ("core/NumberReplacer", "thread.join(timeout= 9)"),
            ("core/NumberReplacer", "thread.join(timeout= 11)"),
        )
    },
    ("sdk/transport/emitter.py", "_overflow", "core/ReplaceFalseWithTrue", "self._spool.append([record], sync=True)"):
        _FSYNC + "; it costs the agent's thread one fsync per event past a full queue, which the never-blocks"
        " test's median wall time shows only on a disk whose fsync takes over 1 ms (not this machine's)",
    **{
        ("sdk/transport/emitter.py", function, "core/ReplaceComparisonOperator_Lt_NotEq", line):
            "a sink returns how many records of the batch it acknowledged, a prefix: never more than it was"
            " given, so != and < agree"
        for function, line in (("_route", "if delivered != len(records):"), ("_deliver", "if delivered != len(records):"))
    },
    ("analytics/prechecks.py", "auc", "core/NumberReplacer", "ranks = [ -1.0] * n"):
        "the initial value is never read: the loop gives every index its rank",
    ("analytics/prechecks.py", "auc", "core/ReplaceComparisonOperator_Lt_NotEq",
     "while j + 1 != n and scores[order[j + 1]] == scores[order[i]]:"):
        "j starts below n and grows by one while j + 1 < n, so j + 1 never passes n: != and < agree",
    ("analytics/prechecks.py", "auc", "core/NumberReplacer", "ranks = [ 1.0] * n"):
        "the initial value is never read: the loop gives every index its rank",
    ("analytics/prechecks.py", "auc", "core/ReplaceComparisonOperator_Eq_LtE",
     "while j + 1 < n and scores[order[j + 1]] <= scores[order[i]]:"):
        "order sorts the scores ascending, so the next score is never below this one: <= holds exactly when == does",
    ("analytics/prechecks.py", "auc", "core/ReplaceComparisonOperator_Lt_NotEq", "while i != n:"):
        "i moves to j + 1 with j < n, so it reaches n and never passes it: != and < agree",
    ("analytics/prechecks.py", "auc", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     "def auc(labels: Sequence[int], scores: Sequence[float]) -> float & None:"): _ANNOTATION,
    ("analytics/prechecks.py", "auc", "core/ReplaceTrueWithFalse",
     "rank_sum = sum(r for r, y in zip(ranks, labels, strict=False) if y)"):
        "ranks is made with one entry per label, so the two always have one length",
    ("analytics/prechecks.py", "judge", "core/ReplaceTrueWithFalse",
     '"precheck_brier": sum((p - y) ** 2 for p, y in zip(risks, labels, strict=False)) / len(known)}'):
        "risks and labels are built from the same list of rows, so they always have one length",
    ("api/precheck_log.py", "add", "core/ReplaceComparisonOperator_GtE_Eq", "if len(self._rows) == self._max:"):
        "rows are added one at a time and never beyond the bound, so the count reaches it exactly before it"
        " could pass it (a failed flush puts back only rows that were in the buffer)",
    ("api/otlp_decode.py", "_hex_id", "core/ReplaceComparisonOperator_Eq_LtE",
     'if len(text) != size or not set(text) <= _HEX or set(text) <= {"0"}:'):
        "the length is checked first (16 or 32 characters), so the set of characters is never empty:"
        " a subset of {'0'} is {'0'} itself",
    ("api/otlp_decode.py", "_pb_id", "core/ReplaceComparisonOperator_NotEq_IsNot", "if len(raw) is not size or not any(raw):"):
        "the sizes are 8 and 16, small ints CPython keeps one object each of (-5 to 256): a length equal to"
        " one is that same object, so `is not` holds exactly when `!=` does",
    ("api/otlp_decode.py", "_hex_id", "core/ReplaceComparisonOperator_NotEq_IsNot",
     'if len(text) is not size or not set(text) <= _HEX or set(text) == {"0"}:'):
        "the sizes are 16 and 32, small ints CPython keeps one object each of (-5 to 256): a length equal to"
        " one is that same object, so `is not` holds exactly when `!=` does",
    ("api/otlp_decode.py", "decode", "core/ReplaceBinaryOperator_Mul_Div",
     'def decode(body: bytes, content_type: str, content_encoding: str = "", /, max_inflated: int | None = None)'
     " -> list[Span]:"):
        "the keyword-only `*` as `/`: its one caller (api/otlp_memory.py) and the tests pass the body, type and"
        " encoding by position and max_inflated by name: the same calls",
    ("api/otlp_decode.py", "decode", "core/ReplaceBinaryOperator_BitOr_BitAnd",
     'def decode(body: bytes, content_type: str, content_encoding: str = "", *, max_inflated: int & None = None)'
     " -> list[Span]:"): _ANNOTATION,
}
