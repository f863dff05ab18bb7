"""The risk model never reads an input's references: an id's weight is one entity's outcome remembered."""

from __future__ import annotations

from retrylens.analytics.classifier import feature_dict
from retrylens.sdk.text.features import extract_input_features


def test_a_references_hash_is_not_a_model_feature_with_or_without_the_text() -> None:
    text = "Refund order 5512 for a damaged lamp"
    features = extract_input_features(text, agent="support-agent")
    assert any(k.startswith("ref:") for k in features)  # on the event, for the advice book
    for fdict in (feature_dict(features), feature_dict(features, text=text)):
        assert not any(k.startswith("ref:") for k in fdict)
        assert fdict  # the rest of the input still is
