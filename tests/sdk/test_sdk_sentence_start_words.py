"""A word capitalised only because it opens a sentence is still a feature; a name never is."""

from __future__ import annotations

from retrylens.sdk.text.features import input_terms, keywords


def test_a_sentence_initial_word_written_lower_case_elsewhere_is_kept() -> None:
    text = "Wire the funds to the supplier. The wire must arrive today."
    assert keywords(text)[0] == "wire"
    assert "wire" in input_terms("Wire the funds today.\nNo second wire for this supplier.")


def test_a_sentence_initial_common_word_is_kept() -> None:
    assert "payment" in keywords("Payment failed again for the supplier")


def test_a_sentence_initial_name_is_still_dropped() -> None:
    for text in (
        "Chen asked for a refund of the order.",
        "Mei Chen asked for a refund.",
        "Refund done. Novak wants the receipt.",
        "Please refund the order. Chen needs it today.",
    ):
        words = set(input_terms(text))
        assert not {"chen", "mei", "novak"} & {w for t in words for w in t.split()}, text


def test_a_capitalised_word_inside_a_sentence_is_still_dropped() -> None:
    assert "paris" not in keywords("ship the parcel to Paris by friday")
