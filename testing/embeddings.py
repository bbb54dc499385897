"""A deterministic stand-in for an embedding model, for the scripted server.

Feature hashing: each word (and each pair of adjacent Chinese/Japanese characters, which
are written without spaces) adds ±1 to one of ``dims`` coordinates chosen by a stable
hash; the vector is scaled to length 1. Texts sharing words point the same way, so
vector search over it behaves like a bag-of-words model: enough to test storing, scoping
and fusing vectors end to end with no model to download. It knows no synonyms, so it is
no measure of a real embedding model's quality.
"""

from __future__ import annotations

import hashlib
import math
import re

__all__ = ["DEFAULT_DIMS", "embed"]

DEFAULT_DIMS = 256
WORD = re.compile(r"[^\W\d_]{2,}|\d+", re.UNICODE)
UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def _features(text: str) -> list[str]:
    text = text.lower()
    features: list[str] = []
    for run in UNSPACED.findall(text):
        features += [run[i : i + 2] for i in range(max(1, len(run) - 1))]
    features += [word for word in WORD.findall(UNSPACED.sub(" ", text))]
    return features


def embed(text: str, dims: int = DEFAULT_DIMS) -> list[float]:
    """The unit vector of ``text``'s hashed features (all zeros for a text without any)."""
    vector = [0.0] * dims
    for feature in _features(text):
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dims
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector] if norm else vector
