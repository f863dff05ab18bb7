"""The failure classifier: task features → calibrated probability of failure or hand-off.

Features are the event's ``input_features`` (from :func:`extract_input_features`, the
function agents, training and the risk API share) plus context known before the run:
phase and the input fingerprint's earlier task failure rate. The hour of day is not used
(training and the API pass none): in the fleet it only marked when yesterday's outage
was, which says nothing about tomorrow's inputs, and the API read it from the wall clock,
so the same demo gave other advice at another time of day. :func:`feature_dict`
turns them into one sparse dict — keywords, log sizes, agent/model/tool indicators, and,
where the task text itself is known (trace files, the pre-check), its words and word
pairs instead of the 12 stored keywords — and a stateless :class:`FeatureHasher` maps
that to columns, so that the same code serves small in-memory training and out-of-core
training over chunks. The one fitted transformation, :class:`SizeNorm` (each agent's
usual input size, learnt from the training rows and saved in the model), adds how large
this input is *for its agent*. Nothing about the run itself (steps, errors, outcome) is an
input.

Two fitting paths, one model type (:class:`RiskModel`):

- :func:`fit_in_memory` — logistic regression (:class:`CompactLogisticRegression`), its
  regularisation and size-feature weight chosen, and its calibration (sigmoid or none)
  chosen and fitted, on folds grouped by task (``groups``) inside the training rows, so a
  task never informs its own score;
- :func:`fit_incremental` — ``SGDClassifier.partial_fit`` chunk by chunk (the whole
  history never sits in memory), the last chunk held out to fit the calibration.

:func:`evaluate` reports ROC-AUC, PR-AUC, Brier score and a calibration table, and
:func:`baselines` the two reference models: the base rate and input length alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import sparse
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction import FeatureHasher
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

from retrylens.sdk.text.features import input_terms, normalise_input
from retrylens.sdk.text.refs import REF_PREFIX
from retrylens.sdk.text.word_hashes import KEYS as WORD_HASH_KEYS
from retrylens.sdk.text.word_hashes import MAX_TERMS, decode, term_hash

from .blas_threads import one_blas_thread
from .reasons import TypicalInput, centred_reasons
from .word_features import MIN_WORD_SUPPORT, MIN_WORD_TASKS, Vocabulary, is_stop_word, unsupported

FEATURE_SET_VERSION = "v6"
N_FEATURES = 2**18
FEATURE_FAMILIES = (
    "kw:<word>", "tool:<name>", "agent=<name>", "model=<name>", "language=<code>",
    "log1p(n_chars|n_words|n_lines|n_numbers|n_entities)", "has_url|has_email|has_code|is_question",
    "phase=<name>", "fp_seen", "fp_failure_rate",
    f"h:<hash> (every content word and adjacent word pair of the input, hashed by the SDK, at most {MAX_TERMS}; "
    "l2-normalised presence; replaces kw: where the event carries them, and the text gives the same)",
    "size_z:<size>|agent=<name> (log size standardised by the agent's training rows, clipped to ±3)",
    f"words: no stop words (scope words such as 'every' kept); only those of >= {MIN_WORD_TASKS} distinct training "
    f"tasks; a word's weight backed by >= {MIN_WORD_SUPPORT} distinct tasks of its outcome",
)
#: Pre-run inputs only: a feature name must start with one of these (a test checks it).
PRE_RUN_PREFIXES = (
    "kw:", "tok:", "h:", "tool:", "agent=", "model=", "language=", "phase=", "hour=", "fp_seen", "fp_failure_rate",
    "n_chars", "n_words", "n_lines", "n_numbers", "n_entities", "has_url", "has_email", "has_code", "is_question",
    "size_z:",
)
C_GRID = (0.3, 1.0, 3.0)
#: Weights of the :class:`SizeNorm` block tried beside C (its value scale sets its penalty); 0 is
#: no per-agent size at all: where size does not move risk, grouped CV leaves it out, so noise
#: in the sizes is not fitted and not shown as a reason.
SIZE_SCALES = (0.0, 0.3, 1.0)
SIZE_KEYS = ("n_chars", "n_words", "n_lines", "n_numbers", "n_entities")
MIN_SIZE_ROWS = 5
SIZE_Z_CLIP = 3.0
TEXT_SIZE_SCALE = 10.0
MIN_CALIBRATION_ROWS = 100
_TOKEN = re.compile(r"[a-z][a-z0-9_\-]+")


@dataclass(frozen=True, kw_only=True)
class RiskContext:
    """Pre-run context of a task beside its input features."""

    phase: str = ""
    hour: int | None = None
    fingerprint_tasks: int = 0
    fingerprint_failed_tasks: int = 0


def text_tokens(text: str) -> dict[str, float]:
    """Words and adjacent word pairs of a task text, 1 + log(tf), scaled to unit length.

    Sublinear, normalised term frequency as in TF-IDF (without the corpus-wide idf, which
    would make the transformation stateful); measured under grouped CV it does as well.
    Stop words are dropped before pairs are formed (:mod:`.word_features`).
    """
    words = [w for w in _TOKEN.findall(normalise_input(text)) if not is_stop_word(w)]
    counts: dict[str, int] = {}
    for token in (*words, *(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))):
        counts[token] = counts.get(token, 0) + 1
    weights = {f"tok:{t}": 1.0 + math.log(n) for t, n in counts.items()}
    norm = math.sqrt(sum(v * v for v in weights.values())) or 1.0
    return {k: v / norm for k, v in weights.items()}


def word_hash_features(hashes: Sequence[int]) -> dict[str, float]:
    """``h:<hash>`` presence of each hashed term, scaled to unit length (as TF-IDF rows are)."""
    unique = dict.fromkeys(hashes)
    if not unique:
        return {}
    value = 1.0 / math.sqrt(len(unique))
    return {f"h:{h}": value for h in unique}


def term_names(text: str) -> dict[str, str]:
    """``h:<hash>`` → the word or word pair of ``text`` it stands for (what an explanation shows)."""
    names: dict[str, str] = {}
    for term in input_terms(text):
        names.setdefault(f"h:{term_hash(term)}", term)
    return names


def feature_dict(
    features: Mapping[str, Any], context: RiskContext | None = None, *, text: str | None = None,
) -> dict[str, float]:
    """The model's sparse input for one task (the single training/serving transformation).

    Words: the event's word hashes (``wh*``, every content word and word pair,
    :mod:`retrylens.sdk.text.word_hashes`) become ``h:<hash>`` features and replace the ``kw:``
    keywords, a 12-word summary of the same text; ``text`` (the input itself, where known)
    gives exactly the same hashes (:func:`~retrylens.sdk.text.features.input_terms`), so a model
    trained on events and one trained on texts read one thing. Events recorded before the
    hashes keep their ``kw:`` keywords (stop words dropped). Keyword pairs are left to
    :mod:`.patterns`. References (``ref:``) are never read: a reference's weight would be
    one entity's outcome remembered (:mod:`.word_features`); the advice book counts them instead.
    """
    context = context or RiskContext()
    hashes = [term_hash(t) for t in input_terms(text)] if text is not None else decode(features)
    hashed = text is not None or WORD_HASH_KEYS[0] in features
    out: dict[str, float] = {}
    for key, value in features.items():
        if key.startswith(REF_PREFIX) or key in WORD_HASH_KEYS or (
            key.startswith("kw:") and (hashed or is_stop_word(key[3:]))
        ):
            continue
        if isinstance(value, bool):
            if value:
                out[key] = 1.0
        elif isinstance(value, int | float):  # sizes; with the text (a trace model), on the words' scale
            out[key] = math.log1p(max(0.0, float(value))) / (TEXT_SIZE_SCALE if text is not None else 1.0)
        elif value:
            out[f"{key}={value}"] = 1.0
    if context.phase:
        out[f"phase={context.phase}"] = 1.0
    if context.hour is not None:
        out[f"hour={context.hour}"] = 1.0
    if context.fingerprint_tasks:
        out["fp_seen"] = math.log1p(context.fingerprint_tasks)
        out["fp_failure_rate"] = context.fingerprint_failed_tasks / context.fingerprint_tasks
    out.update(word_hash_features(hashes))
    return out


def _agent_of(fdict: Mapping[str, float]) -> str:
    return next((key for key in fdict if key.startswith("agent=")), "agent=")


@dataclass(frozen=True)
class SizeNorm:
    """Each agent's mean and spread of the log input sizes, learnt from training rows.

    Why: within one agent, an input longer (more words, numbers, entities) than that
    agent's usual one is a harder or an easier task, and which way differs by agent (a
    long customer scenario fails more often; a long self-contained ticket less). A global
    size feature cannot say "long for this agent", and the raw per-agent size (log ~7,
    spread ~0.3) would need weights the penalty never allows. Standardised per agent and
    scaled by ``scale`` (chosen with C), it sits on the scale of the other features.
    Agents with fewer than :data:`MIN_SIZE_ROWS` training rows, or sizes that never vary,
    get no such feature. Sizes are pre-run, so the result is too.
    """

    stats: Mapping[str, Mapping[str, tuple[float, float]]]
    scale: float = 1.0

    @classmethod
    def fit(cls, dicts: Sequence[Mapping[str, float]], *, scale: float = 1.0) -> SizeNorm:
        values: dict[str, dict[str, list[float]]] = {}
        for fdict in dicts:
            by_key = values.setdefault(_agent_of(fdict), {})
            for key in SIZE_KEYS:
                by_key.setdefault(key, []).append(float(fdict.get(key, 0.0)))
        stats: dict[str, dict[str, tuple[float, float]]] = {}
        for agent, by_key in values.items():
            kept = {key: (float(np.mean(v)), float(np.std(v))) for key, v in by_key.items()
                    if len(v) >= MIN_SIZE_ROWS and float(np.std(v)) > 1e-9}
            if kept:
                stats[agent] = kept
        return cls(stats, scale)

    def apply(self, fdict: Mapping[str, float]) -> dict[str, float]:
        """``fdict`` with this agent's standardised sizes added (idempotent)."""
        agent = _agent_of(fdict)
        out = {key: value for key, value in fdict.items() if not key.startswith("size_z:")}
        if not self.scale:  # size left out: the raw sizes too, which would fit the same noise
            return {key: value for key, value in out.items() if key not in SIZE_KEYS}
        for key, (mean, sd) in self.stats.get(agent, {}).items():
            z = (float(fdict.get(key, 0.0)) - mean) / sd
            out[f"size_z:{key}|{agent}"] = self.scale * min(SIZE_Z_CLIP, max(-SIZE_Z_CLIP, z))
        return out


def input_length(features: Mapping[str, Any]) -> float:
    return math.log1p(float(features.get("n_chars", 0) or 0))


_HASHER = FeatureHasher(n_features=N_FEATURES, input_type="dict", alternate_sign=False)


def vectorise(dicts: Sequence[Mapping[str, float]]) -> Any:
    return _HASHER.transform(dicts)


class CompactLogisticRegression(ClassifierMixin, BaseEstimator):
    """L2 logistic regression fitted on the hashed columns the training rows use.

    Why: lbfgs over all 2**18 hashed columns is ~50× slower than over the few thousand a
    training set touches. The weights are scattered back to full width, so the model
    scores hashed rows directly and :mod:`retrylens.api.fast_model` reads ``coef_``,
    ``intercept_`` and ``classes_`` as from a ``LogisticRegression``. The intercept is
    not penalised (liblinear's is, which biased small models towards 0.5).
    """

    def __init__(self, C: float = 1.0, max_iter: int = 2000, init: Any = None) -> None:  # noqa: N803 - sklearn's name
        self.C = C
        self.max_iter = max_iter
        #: a fitted model of the same columns to start from (a warm start: the optimum is the same,
        #: lbfgs reaches it in fewer steps from a nearby model; ``None``: from zero)
        self.init = init

    def fit(self, x: Any, y: Any) -> CompactLogisticRegression:
        x = sparse.csr_matrix(x)
        used = np.unique(x.indices)
        inner = LogisticRegression(C=self.C, max_iter=self.max_iter, warm_start=self.init is not None)
        if self.init is not None:
            inner.coef_ = self.init.coef_[:, used].copy()
            inner.intercept_ = self.init.intercept_.copy()
        inner.fit(x[:, used], y)
        self.classes_ = inner.classes_
        self.coef_ = np.zeros((1, x.shape[1]))
        self.coef_[0, used] = inner.coef_[0]
        self.intercept_ = inner.intercept_.astype(float).copy()
        self.n_features_in_ = x.shape[1]
        self.n_iter_ = inner.n_iter_
        return self

    def decision_function(self, x: Any) -> np.ndarray:
        return np.asarray(sparse.csr_matrix(x) @ self.coef_[0]).ravel() + self.intercept_[0]

    def predict_proba(self, x: Any) -> np.ndarray:
        p = expit(self.decision_function(x))
        return np.column_stack([1.0 - p, p])

    def predict(self, x: Any) -> np.ndarray:
        return self.classes_[(self.decision_function(x) > 0).astype(int)]


@dataclass
class RiskModel:
    """A fitted classifier over hashed :func:`feature_dict` output.

    ``text_features``: trained with the task text's tokens (:func:`text_tokens`); scoring
    must then pass the text too — use :meth:`model_input`, which knows which it needs.
    ``size_norm``: the fitted :class:`SizeNorm`; ``vocabulary``: the fitted
    :class:`~.word_features.Vocabulary`; :meth:`model_input` and :meth:`predict_proba`
    apply both, so callers pass plain :func:`feature_dict` output.
    """

    calibrated: Any
    coef: np.ndarray
    intercept: float
    meta: dict[str, Any] = field(default_factory=dict)
    text_features: bool = False
    size_norm: SizeNorm | None = None
    vocabulary: Vocabulary | None = None
    typical: TypicalInput | None = None

    def prepare(self, fdict: Mapping[str, float]) -> dict[str, float]:
        """A :func:`feature_dict` row as the weights read it: its vocabulary and :class:`SizeNorm` applied."""
        vocabulary = getattr(self, "vocabulary", None)  # models saved before v4 have none
        out = vocabulary.apply(fdict) if vocabulary is not None else dict(fdict)
        norm = getattr(self, "size_norm", None)  # models saved before v3 have none
        return norm.apply(out) if norm is not None else out

    def model_input(self, features: Mapping[str, Any], context: RiskContext | None = None,
                    text: str | None = None) -> dict[str, float]:
        """:func:`feature_dict` as this model was trained on it, its :class:`SizeNorm` applied."""
        return self.prepare(feature_dict(features, context, text=text if self.text_features else None))

    def predict_proba(self, dicts: Sequence[Mapping[str, float]]) -> np.ndarray:
        if not dicts:
            return np.zeros(0)
        return self.calibrated.predict_proba(vectorise([self.prepare(d) for d in dicts]))[:, 1]

    def risk(self, features: Mapping[str, Any], context: RiskContext | None = None, text: str | None = None) -> float:
        return float(self.predict_proba([self.model_input(features, context, text)])[0])

    def reasons(self, prepared: Mapping[str, float], weight: Callable[[str], float] | None = None, *,
                top: int = 5) -> list[tuple[str, float, float]]:
        """``(feature, value, effect)`` of a :meth:`prepare`-d row against its agent's typical input
        (:mod:`.reasons`); ``weight``: a faster lookup of a feature's weight than the hasher's."""
        typical = getattr(self, "typical", None)  # models saved before v6 have none
        return centred_reasons(prepared, typical.of(prepared) if typical is not None else {},
                               weight or self.weight, top=top)

    def weight(self, name: str) -> float:
        """The linear weight of one named feature (its hashed column's)."""
        column = vectorise([{name: 1.0}]).indices
        return float(self.coef[column].sum()) if len(column) else 0.0

    def contributions(self, fdict: Mapping[str, float], top: int = 5) -> list[tuple[str, float]]:
        """Named features that moved this task's log-odds most (linear weight × value)."""
        scored = []
        for name, value in fdict.items():
            column = vectorise([{name: value}]).indices
            weight = float(self.coef[column].sum()) if len(column) else 0.0
            scored.append((name, weight * value))
        scored.sort(key=lambda item: -abs(item[1]))
        return scored[:top]


def folds(labels: Sequence[int], groups: Sequence[str] | None = None, *, n_splits: int = 5,
          seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified folds; with ``groups``, no group (task) on both sides of any fold.

    Folds whose training or test side lacks a class are dropped (tiny data sets).
    """
    y = np.asarray(labels, dtype=int)
    k = int(max(2, min(n_splits, np.bincount(y, minlength=2).min())))
    if groups is None:
        splitter: Any = StratifiedKFold(k, shuffle=True, random_state=seed)
        splits = splitter.split(np.zeros(len(y)), y)
    else:
        k = min(k, len(set(groups)))
        splits = StratifiedGroupKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y, list(groups))
    return [(tr, te) for tr, te in splits if len(np.unique(y[tr])) == 2 and len(np.unique(y[te])) == 2]


def _selection_splits(y: np.ndarray, groups: Sequence[str] | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """3 grouped folds with ``groups``, else the last 20 % of the (time-ordered) rows."""
    if groups is not None:
        return folds(y, groups, n_splits=3, seed=1)
    cut = int(len(y) * 0.8)
    splits = [(np.arange(cut), np.arange(cut, len(y)))]
    return [(tr, te) for tr, te in splits if len(np.unique(y[tr])) == 2 and len(np.unique(y[te])) == 2]


def _fit(dicts: Sequence[Mapping[str, float]], y: np.ndarray, groups: Sequence[str] | None, c: float, scale: float,
         min_word_tasks: int = MIN_WORD_TASKS, min_support: int = MIN_WORD_SUPPORT,
         init: CompactLogisticRegression | None = None,
         ) -> tuple[Vocabulary, SizeNorm, CompactLogisticRegression, Any]:
    """Vocabulary, :class:`SizeNorm` and regression fitted on these rows (and their matrix).

    With ``min_support`` > 0, words whose weight too few tasks of that outcome back
    (:func:`~.word_features.unsupported`) leave the vocabulary and the rest is refitted once,
    from the first fit's weights. ``init``: a model to start the first fit from (a warm start).
    """
    vocabulary = Vocabulary.fit(dicts, groups, min_tasks=min_word_tasks)
    for pruning in (True, False):
        kept = [vocabulary.apply(d) for d in dicts]
        norm = SizeNorm.fit(kept, scale=scale)
        x = vectorise([norm.apply(d) for d in kept])
        model = CompactLogisticRegression(C=c, init=init).fit(x, y)
        init = model
        if not pruning or min_support <= 0 or not vocabulary.words:
            break
        words = sorted(vocabulary.words)
        columns = vectorise([{w: 1.0} for w in words]).indices
        weights = dict(zip(words, model.coef_[0, columns].tolist(), strict=True))
        drop = unsupported(weights, kept, y.tolist(), groups, min_support=min_support)
        if not drop:
            break
        vocabulary = Vocabulary(vocabulary.words - drop, vocabulary.min_tasks)
    return vocabulary, norm, model, x


def _fold_decisions(dicts: Sequence[Mapping[str, float]], y: np.ndarray, tr: np.ndarray, te: np.ndarray,
                    c: float, scale: float, groups: Sequence[str] | None = None,
                    min_word_tasks: int = MIN_WORD_TASKS, min_support: int = MIN_WORD_SUPPORT,
                    warm: dict[Any, CompactLogisticRegression] | None = None) -> np.ndarray:
    """Fit on rows ``tr`` (vocabulary and :class:`SizeNorm` from those rows only) and score rows ``te``.

    ``warm``: the last model fitted on each fold (keyed by its first test row), started from and
    replaced: the selection's fits on one fold differ only in C or the size weight, and a fold's
    optimum is near the whole set's, so each fit starts close to where it ends (issue 34: the word
    and pair columns made a fit ~40 % dearer in CPU; the warm start takes that back)."""
    key = int(te[0]) if len(te) else -1
    vocabulary, norm, model, _ = _fit([dicts[i] for i in tr], y[tr], None if groups is None else [groups[i] for i in tr],
                                      c, scale, min_word_tasks, min_support,
                                      init=None if warm is None else warm.get(key, warm.get("all")))
    if warm is not None:
        warm[key] = model
    return model.decision_function(vectorise([norm.apply(vocabulary.apply(dicts[i])) for i in te]))


def choose_settings(dicts: Sequence[Mapping[str, float]], y: np.ndarray, *, groups: Sequence[str] | None = None,
                    c_grid: Sequence[float] = C_GRID, scales: Sequence[float] = SIZE_SCALES,
                    min_word_tasks: int = MIN_WORD_TASKS, min_support: int = MIN_WORD_SUPPORT) -> tuple[float, float]:
    """C and the :class:`SizeNorm` weight by mean Brier score on :func:`_selection_splits`
    of the training rows (grouped by task with ``groups``); the first pair when no split.

    C is chosen at the largest size weight, then the size weight at that C (``len(c_grid) +
    len(scales) - 1`` fits, not their product: the word features made each fit dearer, and
    training time on the demo is kept)."""
    splits = _selection_splits(y, groups)
    if not splits:
        return float(c_grid[0] if len(c_grid) == 1 else 1.0), float(scales[-1])

    warm: dict[Any, CompactLogisticRegression] = {}

    def loss(c: float, scale: float) -> float:
        return float(np.mean([brier_score_loss(
            y[te], expit(_fold_decisions(dicts, y, tr, te, c, scale, groups, min_word_tasks, min_support, warm)))
            for tr, te in splits]))

    first = float(max(scales))
    by_c = {float(c): loss(c, first) for c in c_grid}
    c = min(by_c, key=lambda k: by_c[k])
    by_scale = {first: by_c[c], **{float(s): loss(c, s) for s in scales if float(s) != first}}
    return c, min(by_scale, key=lambda k: by_scale[k])


def choose_calibration(decisions: np.ndarray, y: np.ndarray, groups: Sequence[str] | None) -> tuple[float, float, str]:
    """Sigmoid ``(a, b)`` for out-of-fold ``decisions``, or the identity ``(-1, 0)``.

    The sigmoid is kept only if, cross-fitted on those scores (fitted on some folds' scores,
    judged on the others'), its Brier score beats the regression's own probabilities: a
    calibration fitted and judged on the same scores always looks better than it is.
    """
    identity = (-1.0, 0.0, "none")
    if len(y) < MIN_CALIBRATION_ROWS:
        return identity  # on 40 out-of-fold scores a sigmoid can invert the ranking
    cross = folds(y, groups, n_splits=5, seed=2)
    if not cross:
        return identity
    fitted = np.full(len(y), np.nan)
    for tr, te in cross:
        fitted[te] = _sigmoid(decisions[tr], y[tr]).predict_proba(decisions[te, None])[:, 1]
    tested = ~np.isnan(fitted)
    if brier_score_loss(y[tested], fitted[tested]) >= brier_score_loss(y[tested], expit(decisions[tested])):
        return identity
    sigmoid = _sigmoid(decisions, y)
    a, b = -float(sigmoid.coef_[0, 0]), -float(sigmoid.intercept_[0])
    return (a, b, "sigmoid") if a < 0 else identity


def _sigmoid(decisions: np.ndarray, y: np.ndarray) -> LogisticRegression:
    return LogisticRegression(C=1e6, max_iter=1000).fit(decisions[:, None], y)


@one_blas_thread
def fit_in_memory(dicts: Sequence[Mapping[str, float]], labels: Sequence[int], *, c: float | None = None,
                  size_scale: float | None = None, groups: Sequence[str] | None = None,
                  text_features: bool = False, min_word_tasks: int = MIN_WORD_TASKS,
                  min_support: int = MIN_WORD_SUPPORT) -> RiskModel:
    """Logistic regression over :func:`feature_dict` rows: their word vocabulary and :class:`SizeNorm`.

    ``min_word_tasks``: distinct training tasks a word needs to be a feature
    (:class:`~.word_features.Vocabulary`; 1 keeps every word); ``min_support``: distinct
    failed (successful) tasks a word raising (lowering) the risk needs
    (:func:`~.word_features.unsupported`; 0 keeps every weight). Every choice is made
    inside these rows: ``c`` and ``size_scale`` by
    :func:`choose_settings` unless given; the calibration by :func:`choose_calibration` on
    out-of-fold decisions (5 folds, grouped by ``groups`` when given, each fold's
    :class:`SizeNorm` from its own training side). The model itself is fitted on every
    row and wrapped as a sigmoid-calibrated classifier (identity when no calibration
    helps), the shape :mod:`retrylens.api.fast_model` reads.
    """
    y = np.asarray(labels, dtype=int)
    _require_both_classes(y)
    dicts = list(dicts)
    if c is None or size_scale is None:
        c, size_scale = choose_settings(dicts, y, groups=groups, c_grid=C_GRID if c is None else (c,),
                                        scales=SIZE_SCALES if size_scale is None else (size_scale,),
                                        min_word_tasks=min_word_tasks, min_support=min_support)
    vocabulary, norm, final, x = _fit(dicts, y, groups, c, size_scale, min_word_tasks, min_support)
    splits = folds(y, groups) if len(y) >= MIN_CALIBRATION_ROWS else []
    decisions = np.full(len(y), np.nan)
    warm: dict[Any, CompactLogisticRegression] = {"all": final}  # each fold starts from the whole set's model
    for tr, te in splits:
        decisions[te] = _fold_decisions(dicts, y, tr, te, c, size_scale, groups, min_word_tasks, min_support, warm)
    known = ~np.isnan(decisions)
    a, b, how = choose_calibration(decisions[known], y[known],
                                   None if groups is None else [g for g, k in zip(groups, known, strict=True) if k])
    calibrated = CalibratedClassifierCV(FrozenEstimator(final), method="sigmoid").fit(x, y)
    (calibrator,) = calibrated.calibrated_classifiers_[0].calibrators
    calibrator.a_, calibrator.b_ = a, b
    grouped = "grouped " if groups is not None else ""
    label = f"LogisticRegression(C={c}, size_scale={size_scale})+{how}({grouped}cv={len(splits)})"
    typical = typical_input([norm.apply(vocabulary.apply(d)) for d in dicts], final.coef_[0])
    return RiskModel(calibrated, final.coef_[0].copy(), float(final.intercept_[0]), {"estimator": label},
                     text_features=text_features, size_norm=norm, vocabulary=vocabulary, typical=typical)


def typical_input(prepared: Sequence[Mapping[str, float]], coef: np.ndarray) -> TypicalInput:
    """:class:`~.reasons.TypicalInput` of the training rows, kept to the features with a weight."""
    fitted = TypicalInput.fit(prepared)
    names = sorted({name for means in fitted.means.values() for name in means})
    columns = vectorise([{name: 1.0} for name in names]).indices if names else np.zeros(0, dtype=int)
    weighted = {name for name, col in zip(names, columns.tolist(), strict=True) if coef[col] != 0}
    return TypicalInput({agent: {n: v for n, v in means.items() if n in weighted}
                         for agent, means in fitted.means.items()})


@one_blas_thread
def fit_incremental(chunks: Iterable[tuple[Sequence[Mapping[str, float]], Sequence[int]]]) -> RiskModel:
    """Out-of-core: ``partial_fit`` on each chunk in time order; the last chunk calibrates."""
    model = SGDClassifier(loss="log_loss", alpha=1e-4, random_state=0)
    held: tuple[Any, np.ndarray] | None = None
    held_dicts: Sequence[Mapping[str, float]] = ()
    rows = 0
    for dicts, labels in chunks:
        if held is not None:
            model.partial_fit(held[0], held[1], classes=[0, 1])
        held, held_dicts = (vectorise(dicts), np.asarray(labels, dtype=int)), dicts
        rows += len(labels)
    if held is None or not hasattr(model, "coef_"):
        raise ValueError("incremental training needs at least two chunks of examples")
    _require_both_classes(held[1])
    calibrated = CalibratedClassifierCV(FrozenEstimator(model), method="sigmoid").fit(*held)
    return RiskModel(calibrated, model.coef_[0].copy(), float(model.intercept_[0]),
                     {"estimator": "SGDClassifier(log_loss).partial_fit+sigmoid(last chunk)", "rows": rows},
                     typical=typical_input(held_dicts, model.coef_[0]))


def _require_both_classes(y: np.ndarray) -> None:
    if len(np.unique(y)) < 2:
        raise ValueError("training needs both failed and successful tasks")


@dataclass(frozen=True)
class Evaluation:
    n: int
    positives: int
    roc_auc: float | None
    pr_auc: float | None
    brier: float
    calibration: list[dict[str, float]]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(labels: Sequence[int], probabilities: Sequence[float], *, bins: int = 10) -> Evaluation:
    """ROC-AUC, PR-AUC (average precision), Brier score and a calibration table."""
    y = np.asarray(labels, dtype=int)
    p = np.clip(np.asarray(probabilities, dtype=float), 0.0, 1.0)
    both = len(np.unique(y)) == 2
    table = []
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    for b in range(bins):
        mask = which == b
        if mask.any():
            table.append({"low": float(edges[b]), "high": float(edges[b + 1]), "n": int(mask.sum()),
                          "mean_predicted": float(p[mask].mean()), "observed": float(y[mask].mean())})
    return Evaluation(
        n=int(len(y)),
        positives=int(y.sum()),
        roc_auc=float(roc_auc_score(y, p)) if both else None,
        pr_auc=float(average_precision_score(y, p)) if both else None,
        brier=float(brier_score_loss(y, p, pos_label=1)) if len(y) else float("nan"),
        calibration=table,
    )


@one_blas_thread
def baselines(
    train_features: Sequence[Mapping[str, Any]], train_labels: Sequence[int],
    test_features: Sequence[Mapping[str, Any]], test_labels: Sequence[int],
) -> dict[str, Evaluation]:
    """The two reference models: the training base rate, and input length alone."""
    y = np.asarray(train_labels, dtype=int)
    base = float(y.mean())
    out = {"base_rate": evaluate(test_labels, [base] * len(test_labels))}
    x_train = np.array([[input_length(f)] for f in train_features])
    x_test = np.array([[input_length(f)] for f in test_features])
    length = LogisticRegression().fit(x_train, y)
    out["input_length"] = evaluate(test_labels, length.predict_proba(x_test)[:, 1])
    return out
