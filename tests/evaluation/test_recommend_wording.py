"""A gain too small to act on is worded as such, everywhere a person reads it.

The issue's line: ``below_margin: success rate +0.0% (95 % CI +0.0% … +0.0%): better`` —
a difference that prints as zero, called "better". The figures must show their size
(enough digits that a non-zero gain does not print as +0.0 %), and the verdict must say
"too small to act on", not "better": in the recommendation's ``why``, the CLI lines, the
HTML report and the dashboard's candidate table.
"""

from __future__ import annotations

import re
from typing import Any

from retrylens.dashboard.report_view import candidate_rows
from retrylens.evaluation.report import pct, recommend, recommendation_lines
from retrylens.evaluation.report_html import _candidates_section

CHANGES = [{"field": "caps.timeout", "live": 3, "candidate": 5}]


def _policy(name: str, success: tuple[float, float, float]) -> dict[str, Any]:
    value, lo, hi = success
    return {"name": name, "estimates": {"cost_usd": {"value": 0.01, "lo": 0.01, "hi": 0.01}},
            "diff_vs_live": {"success": {"value": value, "lo": lo, "hi": hi},
                             "cost_usd": {"value": 0.0, "lo": -1e-4, "hi": 1e-4}},
            "imputed_share": 0.0, "truncated_share": 0.0, "decision_divergence": 0.0,
            "changes": [] if name == "live" else CHANGES}


def _report() -> dict[str, Any]:
    policies = [_policy("live", (0.0, 0.0, 0.0)), _policy("aggressive", (0.0003, 0.0001, 0.0004))]
    return {"recommendation": recommend(policies),
            "candidates": [{"name": "aggressive", "source": "demo:aggressive", "changes": CHANGES}]}


def _zero_percent(text: str) -> list[str]:
    return re.findall(r"[+-]0\.0+%", text)


def test_a_tiny_gain_is_not_called_better() -> None:
    (verdict,) = _report()["recommendation"]["candidates"]
    assert verdict["verdict"] == "below_margin"
    assert "better" not in verdict["why"] and "below the 1.0% margin" in verdict["why"]


def test_a_tiny_gain_prints_its_size_not_zero() -> None:
    (verdict,) = _report()["recommendation"]["candidates"]
    assert not _zero_percent(verdict["why"]), verdict["why"]
    assert "+0.03%" in verdict["why"] and "+0.01%" in verdict["why"] and "+0.04%" in verdict["why"]


def test_the_cli_line_words_the_verdict_and_names_the_changes() -> None:
    lines = recommendation_lines(_report())
    (line,) = [x for x in lines if "candidate aggressive" in x]
    assert "caps.timeout 3 → 5" in line
    assert "below_margin" not in line and "better" not in line and "too small to act on" in line
    assert not _zero_percent(line), line


def test_the_html_report_words_the_verdict() -> None:
    html = _candidates_section(_report())
    assert "better" not in html and "too small to act on" in html and not _zero_percent(html)


def test_the_dashboard_words_the_verdict() -> None:
    (row,) = candidate_rows(_report())
    assert "better" not in row["verdict"] + row["why"] and "too small to act on" in row["verdict"]


def test_the_three_readers_word_every_verdict_alike() -> None:
    from retrylens.dashboard.report_view import VERDICTS as DASHBOARD
    from retrylens.evaluation.report import VERDICT_WORDS
    from retrylens.evaluation.report_html import VERDICTS as HTML

    assert VERDICT_WORDS == HTML == DASHBOARD


def test_a_percentage_gets_a_second_decimal_exactly_when_one_decimal_would_print_zero() -> None:
    assert pct(0.000496) == "+0.05%"  # 0.0496 % would print as +0.0%
    assert pct(-0.000496) == "-0.05%"
    assert pct(0.000503) == "+0.1%"  # 0.0503 % prints as +0.1% with one decimal already
    assert pct(0.00004) == "+0.00%"  # below 0.005 %: less than one task in 10,000
    assert pct(0.0) == "+0.0%" and pct(0.0123) == "+1.2%"


def test_the_dashboard_headline_says_no_clear_winner_once() -> None:
    """The reports page printed "no clear winner: keep the live policy. no clear winner: no
    candidate beats …; keep the live policy": the decision's words, then the reason that
    already says them."""
    from retrylens.dashboard.report_view import headline

    text = headline({"recommendation": recommend([_policy("live", (0.0, 0.0, 0.0)),
                                                  _policy("aggressive", (0.0, -0.01, 0.01))])})
    assert text.count("no clear winner") == 1, text
    assert text.count("keep the live policy") == 1, text
    assert "practical margin" in text


def test_the_dashboard_headline_of_an_adoption_names_it_and_says_why() -> None:
    from retrylens.dashboard.report_view import headline

    text = headline({"recommendation": recommend([_policy("live", (0.0, 0.0, 0.0)),
                                                  _policy("patient", (0.05, 0.03, 0.07))])})
    assert text.startswith("adopt patient (caps.timeout: 3 → 5). "), text
    assert "success rate" in text


def test_the_cli_line_says_no_clear_winner_once() -> None:
    """`retrylens demo` printed "no_clear_winner: no clear winner: no candidate beats …"."""
    report = {"recommendation": recommend([_policy("live", (0.0, 0.0, 0.0)),
                                           _policy("aggressive", (0.0, -0.01, 0.01))]),
              "candidates": [{"name": "aggressive", "changes": CHANGES}]}
    head = recommendation_lines(report)[0]
    assert head.replace("_", " ").count("no clear winner") == 1, head
    assert head.startswith("no clear winner: ") and "keep the live policy" in head
