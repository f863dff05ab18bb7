"""Which features the risk model weighs, among those recent inputs actually carry.

The model's hashed weight vector has no names; the names come from inputs. The dashboard's
model page (through the API or on a store it opens itself) and the API's ``/model`` route
both show the weights of the features seen in the most recent stored inputs, prepared as
the model scores them (its per-agent standardised sizes included), so the page shows what
moves today's scores, not every word ever hashed. An API caller sees only the inputs of
the projects its key may read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from retrylens.sdk.text.word_hashes import term_hash
from retrylens.store.sql import query_rows

from .classifier import RiskModel, feature_dict

if TYPE_CHECKING:
    from retrylens.store import EventStore

#: Recent inputs read to name the features (newest first).
RECENT_INPUTS = 500
#: Features listed, largest |weight| first.
TOP_WEIGHTS = 25

_RECENT = (
    "SELECT input_features FROM [[db]].events WHERE input_features != ''{projects}"
    " ORDER BY ts DESC, event_id LIMIT {{limit:UInt32}}"
)


def recent_input_features(
    store: EventStore, *, projects: frozenset[str] | None = None, limit: int = RECENT_INPUTS
) -> list[dict[str, Any]]:
    """The input features of the newest stored events (of ``projects`` only, if given)."""
    if projects is not None and not projects:
        return []
    where = "" if projects is None else " AND project IN {projects:Array(String)}"
    parameters: dict[str, Any] = {"limit": limit}
    if projects is not None:
        parameters["projects"] = sorted(projects)
    rows = query_rows(store.client, store.sql(_RECENT.format(projects=where)), parameters)
    found = []
    for row in rows:
        try:
            features = json.loads(row["input_features"])
        except ValueError:
            continue
        if isinstance(features, dict):
            found.append(features)
    return found


def feature_weights(
    model: RiskModel, inputs: Iterable[Mapping[str, Any]], *, top: int = TOP_WEIGHTS
) -> list[tuple[str, float]]:
    """(feature name, log-odds weight per unit) of the features in ``inputs``, as the model
    scores them, largest |weight| first. A hashed word (``h:<hash>``) is named ``kw:<word>`` when
    an input's readable keywords hold the word it hashes (the stored event has no other text)."""
    names: dict[str, float] = {}
    words: dict[str, str] = {}
    for features in inputs:
        names.update(dict.fromkeys(model.prepare(feature_dict(features)), 1.0))
        words.update({f"h:{term_hash(key[3:])}": key for key in features if key.startswith("kw:")})
    weights = model.contributions(names, top=top) if names else []
    return [(words.get(name, name), weight) for name, weight in weights]
