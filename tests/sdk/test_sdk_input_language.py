"""The ``language`` input feature: the share of ASCII letters, whatever shortcut computes it.

The risk model was trained on this feature as events stored it, so a faster computation must
give the same value for every text (no training/serving skew)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from retrylens.sdk.text.features import _language, extract_input_features


def _by_every_letter(text: str) -> str:
    """The rule as first written: over 90 % of the letters ASCII → ``en``."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "none"
    return "en" if sum(c.isascii() for c in letters) / len(letters) > 0.9 else "other"


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_an_ascii_text_has_the_language_its_letters_give(text):
    assert _language(text) == _by_every_letter(text)


@given(st.text())
def test_any_text_has_the_language_its_letters_give(text):
    assert _language(text) == _by_every_letter(text)


def test_the_feature_names_the_language_of_plain_accented_and_letterless_inputs():
    cases = {"Refund order 42 today": "en", "1234 5678 — 90": "none", "": "none",
             "Überprüfe die Rückerstattung für Bestellung 42": "other",
             "Refund the café order 42 and report back": "en", "Проверь возврат заказа": "other"}
    assert {text: extract_input_features(text)["language"] for text in cases} == cases
