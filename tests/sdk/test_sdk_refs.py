"""References an input names become hashed ``ref:`` features: the same SKU however it is worded."""

from __future__ import annotations

from retrylens.schemas import limits
from retrylens.sdk.text.features import extract_input_features
from retrylens.sdk.text.refs import MAX_REFS, input_refs, ref_feature


def _refs(features: dict) -> set[str]:
    return {k for k in features if k.startswith("ref:")}


def test_a_deleted_sku_named_in_differently_worded_requests_is_one_hashed_feature() -> None:
    first = extract_input_features("Restock SKU-4411 in the Leeds warehouse, 20 units.")
    second = extract_input_features("Customer wants sku-4411 shipped express to Porto")
    shared = _refs(first) & _refs(second)
    assert shared == {ref_feature("sku-4411")}
    # never the raw token: only its hash leaves the agent
    assert not any("4411" in key for key in {*first, *second})


def test_only_short_tokens_with_a_digit_of_the_redacted_text_are_references() -> None:
    text = (
        "Order 88412 for ann@example.org, card 4111 1111 1111 1111, token "
        "sk-live-abcdefghijklmnop1234, invoice INV20241105XYZ99, in stock"
    )
    refs = input_refs(text)
    assert list(refs.values())[0] == "88412"
    tokens = set(refs.values())
    assert "inv20241105xyz99" in tokens  # 16 characters: still a reference
    assert not any("@" in t or "4111" in t or "sk-live" in t for t in tokens)  # redacted first
    assert "stock" not in tokens  # no digit: a word, not a reference
    assert input_refs("ticket 12 and 7 of batch ab") == {}  # shorter than three characters


def test_a_long_token_is_never_taken_and_an_input_gives_at_most_a_few() -> None:
    assert input_refs("session a1b2c3d4e5f6g7h8i9") == {}  # 18 characters: could be a secret
    many = input_refs("items 1001 1002 1003 1004 1005 1006 and 1001 again")
    assert list(many.values()) == ["1001", "1002", "1003", "1004"][:MAX_REFS]


def test_an_input_full_of_everything_still_fits_an_events_features() -> None:
    text = " ".join(f"word{chr(97 + i)}x topic{chr(97 + i)}y ref-{i}00" for i in range(26))
    tools = [f"tool.number{i}" for i in range(20)]
    features = extract_input_features(
        text + " " + " ".join(tools), agent="a" * 300, model="m" * 300, tools=tools
    )
    assert len(features) <= limits.MAX_INPUT_FEATURES
    assert all(len(k) <= limits.MAX_FEATURE_KEY_CHARS for k in features)
    assert len(_refs(features)) == MAX_REFS
