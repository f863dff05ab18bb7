"""Sentence-embedding features of a task text, from a model whose wheel ships its weights.

Why: word features only know the words a training task used; an embedding puts "cancel
my booking" next to "cancel the reservation". Measured as the candidate ``words_v4_emb``
(:data:`FEATURE_SET` = the ``v4`` words plus the first :data:`DIMENSIONS` embedding
dimensions) in ``bench/model_selection.py`` against ``v4`` and the baselines. It did not
beat them (``bench/RESULTS.md``, session 9), so it lives here, beside the bench, and not
in the product.

The model is WordLlama's ``l2_supercat`` (256 dimensions, Matryoshka-trained, so the
first dimensions are a smaller embedding of their own), from the optional ``embeddings``
extra (``pip install retrylens[embeddings]``, for this bench only). It is read from the files inside the
installed package and never from a hub: ``WordLlama.load()`` looks for the shipped
tokenizer in a folder the wheel does not have and then downloads it, which fails
offline. Without the extra, :func:`available` is false and :func:`load` raises
:class:`~retrylens.errors.ConfigError` (what to install).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from retrylens.errors import ConfigError

#: Embedding dimensions kept (a Matryoshka prefix; 64 of the model's 256).
DIMENSIONS = 64
#: Weight of the embedding block beside the unit-length word features.
SCALE = 1.0
PREFIX = "emb:"
FEATURE_SET = f"v4+{PREFIX}{DIMENSIONS}"
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = "l2_supercat_tokenizer_config.json"


def available() -> bool:
    """Whether the ``embeddings`` extra is installed."""
    return importlib.util.find_spec("wordllama") is not None


@lru_cache(maxsize=1)
def load() -> Any:
    """The embedding model, from the installed package's own files (no network)."""
    if not available():
        raise ConfigError("the embedding feature needs the 'embeddings' extra: "
                                        "pip install 'retrylens[embeddings]'")
    import wordllama
    from safetensors import safe_open
    from wordllama.inference import WordLlamaInference
    from wordllama.tokenizers import tokenizer_from_file

    weights = Path(wordllama.__file__).parent.joinpath(*_WEIGHTS)
    if not weights.exists():
        raise ConfigError(f"the installed wordllama ships no weights at {weights}")
    with safe_open(str(weights), framework="np") as f:
        matrix = f.get_tensor("embedding.weight")
    return WordLlamaInference(matrix, tokenizer_from_file(_TOKENIZER))


def embed(texts: Sequence[str], dimensions: int = DIMENSIONS) -> np.ndarray:
    """Unit-length embeddings of ``texts`` truncated to ``dimensions`` (rows of zeros for empty texts)."""
    if not texts:
        return np.zeros((0, dimensions))
    vectors = np.asarray(load().embed(list(texts)), dtype=float)[:, :dimensions]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    vectors[[not t.strip() for t in texts]] = 0.0
    return vectors


def embedding_features(texts: Sequence[str], dimensions: int = DIMENSIONS, scale: float = SCALE
                       ) -> list[dict[str, float]]:
    """One ``{"emb:<i>": value}`` dict per text, to merge into its :func:`~.classifier.feature_dict` row."""
    return [{f"{PREFIX}{i}": scale * float(v) for i, v in enumerate(row) if v}
            for row in embed(texts, dimensions)]


def with_embedding(rows: Sequence[Mapping[str, float]], texts: Sequence[str], dimensions: int = DIMENSIONS,
                   scale: float = SCALE) -> list[dict[str, float]]:
    """``rows`` with each text's embedding features added."""
    return [{**row, **extra} for row, extra in zip(rows, embedding_features(texts, dimensions, scale), strict=True)]
