"""The event carries every content word of the input, hashed, from the redacted text only."""

from __future__ import annotations

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from retrylens.sdk.text.features import extract_input_features, input_terms, keywords
from retrylens.sdk.text.word_hashes import (
    KEYS,
    MAX_TERMS,
    SKLEARN_ENGLISH_STOP_WORDS,
    decode,
    encode,
    term_hash,
)


def test_the_copied_stop_words_are_scikit_learns() -> None:
    assert frozenset(ENGLISH_STOP_WORDS) == SKLEARN_ENGLISH_STOP_WORDS


def test_hashes_round_trip_through_the_feature_values_within_the_event_limits() -> None:
    hashes = [term_hash(f"word{i}") for i in range(MAX_TERMS + 50)]
    packed = encode(hashes)
    assert set(packed) <= set(KEYS) and all(len(v) <= 256 for v in packed.values())
    assert decode(packed) == list(dict.fromkeys(hashes))[:MAX_TERMS]


def test_ties_among_keywords_go_to_the_word_seen_first_not_the_alphabet() -> None:
    assert keywords("zebra yak xylophone wire", limit=2) == ["zebra", "yak"]


def test_stop_words_are_dropped_before_pairs_are_formed() -> None:
    assert input_terms("wire the funds") == ["wire", "funds", "wire funds"]


def test_secrets_and_names_are_never_hashed() -> None:
    text = "Refund for Mei Chen, key sk-abcdefghijklmnopqrstuv, mail ana@example.com about the parcel"
    hashes = set(decode(extract_input_features(text)))
    for word in ("mei", "chen", "ana", "example", "abcdefghijklmnopqrstuv", "sk-abcdefghijklmnopqrstuv"):
        assert term_hash(word) not in hashes
    assert term_hash("parcel") in hashes
