"""Mutation targets: what the SDK redacts before an event leaves the process: the sanitizer, names, processors (issue 25)."""

from __future__ import annotations

from .target import Equivalent, Target

#: the tests of tests/sdk/test_sdk_redaction.py that meet a name or must keep text unchanged
_NAME_TESTS = (
    "a_name_in_an_error_message_never_reaches_events",
    "a_name_in_the_goal_never_reaches_events",
    "an_ordinary_error_message_reaches_events_unchanged",
    "a_callback_channel_receives_the_redacted_package",
    "a_file_channel_writes_neither_names_nor_secrets",
)
#: the tests of tests/sdk/test_redaction_guarantees.py with a name in every free-text field
_NAME_FIELDS = (
    "a_name_and_a_key_in_a_step_name_never_reach_the_decision_event",
    "redact_event_alone_cleans_every_free_text_field_and_nothing_else",
    "each_free_text_field_alone_is_redacted",
)

TARGETS: dict[str, Target] = {
    "sanitizer": Target(
        "sdk/text/sanitizer.py",
        ("_status_type", "_classify_type", "classify"),
        # --noconftest: no fixture needed; the root conftest loads the store on every mutant
        (
            "--noconftest",
            "tests/sdk/test_classify_guarantees.py",
            "tests/sdk/test_classify_by_name.py",
            "tests/sdk/test_redaction_cut.py",
            "tests/sdk/test_sdk_redaction.py",
            "tests/sdk/test_sdk_stories.py",
        ),
    ),
    # session 9: a user's error wrapped around a provider failure is classified by that failure
    "wrapped_classify": Target(
        "sdk/text/sanitizer.py",
        ("classify", "_provider_error_behind"),
        (
            "tests/sdk/test_provider_error_behind_user_error.py",
            "tests/sdk/test_classify_guarantees.py",
            "tests/sdk/test_classify_by_name.py",
        ),
    ),
    "wrapped_behind": Target(
        "sdk/integrations/providers/http_resends.py",
        ("provider_error_behind",),
        ("tests/sdk/test_provider_error_behind_user_error.py",),
    ),
    # the patterns the SDK and the server share (issue 35 item 6, issue 36 item 5)
    "redaction": Target(
        "sdk/text/redaction.py",
        ("_card", "_aws_secret", "_iban", "_phone", "may_hold_secrets", "redact", "_redact"),
        (
            "--noconftest",
            "tests/sdk/test_redaction_patterns.py",
            "tests/sdk/test_redaction_world.py",
            "tests/sdk/test_redaction_cut.py",
            "tests/sdk/test_sdk_redaction.py",
        ),
    ),
    "cards": Target(
        "sdk/text/number_checks.py",
        ("luhn_ok", "iban_ok", "phone_digits_ok"),
        ("tests/sdk/test_sdk_redaction.py", "tests/sdk/test_redaction_world.py"),
    ),
    "personal": Target(
        "sdk/text/personal.py",
        (
            "_capitalised",
            "_capitals",
            "_kind",
            "find_names",
            "_gap",
            "_name_at",
            "_past_particles",
            "_run_end",
            "redact_names",
            "_redact_names",
        ),
        # --noconftest: no fixture needed; the root conftest loads the store on every mutant
        # and only the tests that meet a name (the secrets' and cards' cases cost as much again)
        (
            "--noconftest",
            "tests/sdk/test_name_edges_guarantees.py",
            *(f"tests/sdk/test_sdk_redaction.py::test_{name}" for name in _NAME_TESTS),
            *(f"tests/sdk/test_redaction_guarantees.py::test_{name}" for name in _NAME_FIELDS),
        ),
    ),
    "processors": Target(
        "sdk/text/processors.py",
        ("_clean", "__call__", "_clean_snapshot", "process"),
        # --noconftest: no fixture needed (session 9: 146 tests, 3 s of CPU, against 10 s more
        # for the root conftest's store on every mutant)
        (
            "--noconftest",
            "tests/sdk/test_redaction_guarantees.py",
            "tests/sdk/test_sdk_redaction.py",
            "tests/sdk/test_sdk_stories.py",
            "tests/sdk/test_sdk_fast_events.py",
            "tests/sdk/test_sdk_governor.py",
        ),
    ),
}

EQUIVALENT: Equivalent = {
    (
        "sdk/text/number_checks.py",
        "luhn_ok",
        "core/ReplaceComparisonOperator_Eq_Is",
        "if i % 2 is parity:",
    ): "0 and 1 are cached int objects in CPython: `is` and `==` agree on them",
    (
        "sdk/text/number_checks.py",
        "luhn_ok",
        "core/ReplaceComparisonOperator_Eq_LtE",
        "return total % 10 <= 0",
    ): "a remainder modulo 10 is never negative: <= 0 is == 0",
    (
        "sdk/text/processors.py",
        "process",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def process(processors: Sequence[Processor], event: RetryEvent) -> RetryEvent & None:",
    ): "an annotation: strings under `from __future__ import annotations`, never evaluated",
    (
        "sdk/text/processors.py",
        "__call__",
        "core/ReplaceBinaryOperator_BitOr_BitAnd",
        "def __call__(self, event: RetryEvent) -> RetryEvent & None:",
    ): "an annotation: strings under `from __future__ import annotations`, never evaluated",
    (
        "sdk/text/processors.py",
        "_clean_snapshot",
        "core/ReplaceTrueWithFalse",
        "if not any(c != m.content for c, m in zip(cleaned, snap.last_messages, strict=False)):",
    ): "`cleaned` is made from `snap.last_messages` one for one: the lengths are always equal",
    (
        "sdk/text/processors.py",
        "_clean_snapshot",
        "core/ReplaceTrueWithFalse",
        "for c, m in zip(cleaned, snap.last_messages, strict=False)",
    ): "`cleaned` is made from `snap.last_messages` one for one: the lengths are always equal",
    (
        "sdk/text/processors.py",
        "_clean_snapshot",
        "core/ReplaceComparisonOperator_Eq_Is",
        'm if c is m.content else m.model_copy(update={"content": c})',
    ): "a text with nothing to redact comes back as the same str (re.sub and slicing return "
    "their argument when they change nothing), or, from the memo, as an equal one: then the "
    "message is copied with the same content; the event's bytes are the same",
    (
        "sdk/text/processors.py",
        "__call__",
        "core/ReplaceComparisonOperator_GtE_Eq",
        "if len(self._snapshots) == 512:",
    ): "the memo grows by one entry at a time and is cleared on reaching 512: it never holds "
    "more, so `== 512` and `>= 512` are true on the same calls",
    (
        "sdk/text/processors.py",
        "__call__",
        "core/ReplaceComparisonOperator_IsNot_NotEq",
        "if known is None or known[0] != snap:",
    ): "the memo keeps each snapshot it holds alive, so an entry found under id(snap) is snap "
    "itself: `known[0] != snap` is false exactly when `known[0] is not snap` is",
    (
        "sdk/text/processors.py",
        "__call__",
        "core/ReplaceComparisonOperator_IsNot_NotEq",
        "if known[1] != snap:",
    ): "the cleaned snapshot is either snap itself or a copy whose content differs "
    "(_clean_snapshot copies only when a message changed): `!=` and `is not` agree",
}
_MEMO = (
    "both branches compute `_redact(text, limit)`; the length only decides whether the "
    "answer is memoised"
)
_SANITIZER_ANNOTATION = "an annotation: a string under `from __future__ import annotations`"
EQUIVALENT.update(
    {
        ("sdk/text/redaction.py", "redact", operator, f"if {test}:"): _MEMO
        for operator, test in (
            ("core/ReplaceComparisonOperator_LtE_Lt", "len(text) < 2_048"),
            ("core/ReplaceComparisonOperator_LtE_Gt", "len(text) > 2_048"),
            ("core/ReplaceComparisonOperator_LtE_Eq", "len(text) == 2_048"),
            ("core/ReplaceComparisonOperator_LtE_NotEq", "len(text) != 2_048"),
            ("core/ReplaceComparisonOperator_LtE_GtE", "len(text) >= 2_048"),
            ("core/AddNot", "not len(text) <= 2_048"),
            ("core/NumberReplacer", "len(text) <= 2047"),
            ("core/NumberReplacer", "len(text) <= 2049"),
        )
    }
)
EQUIVALENT.update(
    {
        (
            "sdk/text/redaction.py",
            "redact",
            "core/ReplaceBinaryOperator_BitOr_BitAnd",
            "def redact(text: str, *, limit: int & None = None) -> str:",
        ): _SANITIZER_ANNOTATION,
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/ReplaceBinaryOperator_BitOr_BitAnd",
            "def _redact(text: str, limit: int & None) -> str:",
        ): _SANITIZER_ANNOTATION,
        (
            "sdk/text/sanitizer.py",
            "_classify_type",
            "core/ReplaceBinaryOperator_BitOr_BitAnd",
            "def _classify_type(kind: type[BaseException], status: int & None, text: str) -> "
            "ErrorType:",
        ): _SANITIZER_ANNOTATION,
        (
            "sdk/text/redaction.py",
            "redact",
            "core/ReplaceBinaryOperator_Mul_Div",
            "def redact(text: str, /, limit: int | None = None) -> str:",
        ): "every call passes limit by keyword, which `/` still accepts",
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/ReplaceComparisonOperator_Gt_LtE",
            "if limit is not None and len(text) <= limit + _CUT_MARGIN:",
        ): "the cut before matching is invisible in the output: when it runs it keeps the limit, the margin and the whole token it falls in (a no-op on a shorter text), and when it does not run the whole text is matched and the final cut keeps the same limit; only the work done differs (and a token over 64 KiB straddling the cut, which no text here has)",
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/ReplaceBinaryOperator_Add_Sub",
            "if limit is not None and len(text) > limit - _CUT_MARGIN:",
        ): "the cut before matching is invisible in the output: when it runs it keeps the limit, the margin and the whole token it falls in (a no-op on a shorter text), and when it does not run the whole text is matched and the final cut keeps the same limit; only the work done differs (and a token over 64 KiB straddling the cut, which no text here has)",
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/ReplaceComparisonOperator_Gt_Lt",
            "if limit is not None and len(text) < limit + _CUT_MARGIN:",
        ): "the cut before matching is invisible in the output: when it runs it keeps the limit, the margin and the whole token it falls in (a no-op on a shorter text), and when it does not run the whole text is matched and the final cut keeps the same limit; only the work done differs (and a token over 64 KiB straddling the cut, which no text here has)",
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/ReplaceComparisonOperator_Gt_Eq",
            "if limit is not None and len(text) == limit + _CUT_MARGIN:",
        ): "the cut before matching is invisible in the output: when it runs it keeps the limit, the margin and the whole token it falls in (a no-op on a shorter text), and when it does not run the whole text is matched and the final cut keeps the same limit; only the work done differs (and a token over 64 KiB straddling the cut, which no text here has)",
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/ReplaceComparisonOperator_Gt_GtE",
            "if limit is not None and len(text) >= limit + _CUT_MARGIN:",
        ): "the cut before matching is invisible in the output: when it runs it keeps the limit, the margin and the whole token it falls in (a no-op on a shorter text), and when it does not run the whole text is matched and the final cut keeps the same limit; only the work done differs (and a token over 64 KiB straddling the cut, which no text here has)",
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/ReplaceComparisonOperator_Gt_NotEq",
            "if limit is not None and len(text) != limit + _CUT_MARGIN:",
        ): "the cut before matching is invisible in the output: when it runs it keeps the limit, the margin and the whole token it falls in (a no-op on a shorter text), and when it does not run the whole text is matched and the final cut keeps the same limit; only the work done differs (and a token over 64 KiB straddling the cut, which no text here has)",
        (
            "sdk/text/redaction.py",
            "_redact",
            "core/NumberReplacer",
            'text = text[: max( -1, limit - 1)] + "…"',
        ): "max(-1, limit - 1) differs from max(0, limit - 1) only for a limit of 0, which no "
        "caller passes (every limit is a schema constant of 200 characters or more)",
        (
            "sdk/text/sanitizer.py",
            "_classify_type",
            "core/ReplaceComparisonOperator_Eq_GtE",
            'if name in _BY_NAME and not (name >= "ValidationError" and status):',
        ): "no other name in the table sorts at or after 'ValidationError', so >= picks out the "
        "same entry as ==",
    }
)
_ONE_SPACE = (
    "CPython keeps one object per one-character Latin-1 string: the literal ' ' and a "
    "one-character slice equal to it (the gap) are that object, so `is` is `==` here"
)
_INTERNED_KIND = (
    "a word's kind is always one of `_kind`'s literals, and CPython interns a module's "
    "identifier-like constants: a kind equal to a literal ('C', 'T', 'p') is that object"
)
_KINDS = "a word's kind is one of 'T', 'C', 'U', '-' and 'p': only 'p' sorts at or after 'p'"
_FIRST_WORD = (
    "`i == 0` only spares `_gap(text, words, i - 1)`, which at i == 0 slices from the end of "
    "the last word to the start of the first (two words at least here): '', never ', ', so "
    "the clause is true at 0 either way"
)
EQUIVALENT.update(
    {
        (
            "sdk/text/personal.py",
            "_name_at",
            operator,
            f'if not after.startswith(",") and ({test} or _gap(text, words, i - 1) != ", "):',
        ): _FIRST_WORD
        for operator, test in (
            ("core/ReplaceComparisonOperator_Eq_Lt", "i < 0"),
            ("core/ReplaceComparisonOperator_Eq_LtE", "i <= 0"),
            ("core/ReplaceComparisonOperator_Eq_Is", "i is 0"),
            ("core/NumberReplacer", "i == -1"),
        )
    }
)
_PERSONAL_ANNOTATION = "an annotation: a string under `from __future__ import annotations`"
_WITHIN = (
    "`_name_at` moves on by one word at least and never past the end (the words it spans "
    "exist), so the index meets len(words) exactly: `!=` is `<`, and in `_gap` `==` is `>=`"
)
EQUIVALENT.update(
    {
        ("sdk/text/personal.py", function, operator, line): why
        for function, operator, line, why in (
            (
                "_name_at",
                "core/ReplaceComparisonOperator_Eq_Is",
                'while _gap(text, words, end) is " " and words[end + 1][2] in "CU":',
                _ONE_SPACE,
            ),
            (
                "_run_end",
                "core/ReplaceComparisonOperator_Eq_Is",
                'while _gap(text, words, end) is " ":',
                _ONE_SPACE,
            ),
            (
                "_name_at",
                "core/ReplaceComparisonOperator_Gt_NotEq",
                'if end != i and "C" in kinds:',
                "`_run_end(text, words, i)` never returns less than `i`: it starts at `i` and "
                "only moves to `_past_particles(..., end + 1)`, which is past `end`; so "
                "`end > i` is `end != i`",
            ),
            (
                "_name_at",
                "core/ReplaceComparisonOperator_Eq_Is",
                'if _gap(text, words, i) == ", " and kind is "C" and words[i + 1][2] == "C":',
                _INTERNED_KIND,
            ),
            (
                "_name_at",
                "core/ReplaceComparisonOperator_Eq_Is",
                'if _gap(text, words, i) == ", " and kind == "C" and words[i + 1][2] is "C":',
                _INTERNED_KIND,
            ),
            (
                "_name_at",
                "core/ReplaceComparisonOperator_Eq_Is",
                'if kind is "T" and _gap(text, words, i) in (" ", ". ") and words[i + 1][2] in '
                '"CU":',
                _INTERNED_KIND,
            ),
            (
                "_name_at",
                "core/ReplaceComparisonOperator_Eq_LtE",
                'if _gap(text, words, i) == ", " and kind <= "C" and words[i + 1][2] == "C":',
                "only a 'C' or 'U' word gets past `if kind not in \"CU\"`, and 'U' sorts after "
                "'C': `<=` is `==`",
            ),
            (
                "_name_at",
                "core/ReplaceBinaryOperator_BitOr_BitAnd",
                ") -> tuple[tuple[int, int] & None, int]:",
                _PERSONAL_ANNOTATION,
            ),
            (
                "_past_particles",
                "core/ReplaceBinaryOperator_BitOr_BitAnd",
                "def _past_particles(text: str, words: list[tuple[int, int, str]], k: int) -> "
                "int & None:",
                _PERSONAL_ANNOTATION,
            ),
            (
                "_past_particles",
                "core/ReplaceComparisonOperator_Eq_GtE",
                'while words[k][2] >= "p" and _gap(text, words, k) == " ":',
                _KINDS,
            ),
            (
                "_past_particles",
                "core/ReplaceComparisonOperator_Eq_Is",
                'while words[k][2] is "p" and _gap(text, words, k) == " ":',
                _INTERNED_KIND,
            ),
            (
                "_past_particles",
                "core/ReplaceComparisonOperator_Eq_Is",
                'while words[k][2] == "p" and _gap(text, words, k) is " ":',
                _ONE_SPACE,
            ),
            (
                "find_names",
                "core/ReplaceComparisonOperator_Lt_NotEq",
                "while i != len(words):",
                _WITHIN,
            ),
            ("_gap", "core/ReplaceComparisonOperator_GtE_Eq", "if i + 1 == len(words):", _WITHIN),
        )
    }
)
_NAMES_MEMO = (
    "both branches compute `_redact_names(text, replacement)`; the length only decides whether "
    "the answer is memoised"
)
EQUIVALENT.update(
    {
        ("sdk/text/personal.py", "redact_names", operator, f"if {test}:"): _NAMES_MEMO
        for operator, test in (
            ("core/ReplaceComparisonOperator_Gt_Eq", "len(text) == 2_048"),
            ("core/ReplaceComparisonOperator_Gt_NotEq", "len(text) != 2_048"),
            ("core/ReplaceComparisonOperator_Gt_Lt", "len(text) < 2_048"),
            ("core/ReplaceComparisonOperator_Gt_LtE", "len(text) <= 2_048"),
            ("core/ReplaceComparisonOperator_Gt_GtE", "len(text) >= 2_048"),
            ("core/AddNot", "not len(text) > 2_048"),
            ("core/NumberReplacer", "len(text) > 2049"),
            ("core/NumberReplacer", "len(text) > 2047"),
        )
    }
)
EQUIVALENT.update(
    {
        (
            "sdk/text/sanitizer.py",
            "_provider_error_behind",
            "core/ReplaceBinaryOperator_BitOr_BitAnd",
            "def _provider_error_behind(exc: BaseException) -> BaseException & None:",
        ): _SANITIZER_ANNOTATION,
    }
)
_IDENTITY_EQ = (
    "neither exceptions nor httpx responses define __eq__: == is identity for them, as is"
)
EQUIVALENT.update(
    {
        (
            "sdk/integrations/providers/http_resends.py",
            "provider_error_behind",
            "core/ReplaceBinaryOperator_BitOr_BitAnd",
            "def provider_error_behind(error: BaseException) -> BaseException & None:",
        ): _SANITIZER_ANNOTATION,
        (
            "sdk/integrations/providers/http_resends.py",
            "provider_error_behind",
            "core/ReplaceComparisonOperator_Is_Eq",
            "return None if link == error else link  # ``error`` itself: it is the provider's failure",
        ): _IDENTITY_EQ,
        (
            "sdk/integrations/providers/http_resends.py",
            "provider_error_behind",
            "core/ReplaceComparisonOperator_Is_Eq",
            "if response is not None and seen.get(id(response)) == response:",
        ): _IDENTITY_EQ,
    }
)
