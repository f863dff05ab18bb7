"""Log-spaced histogram keys: the documented 1 % bound, and the same keys in SQL as in Python."""

from __future__ import annotations

import random

import numpy as np
import pytest

from retrylens.analytics.histogram import (
    EXACT_UP_TO,
    RELATIVE_ERROR,
    key_of,
    key_sql,
    quantile,
    quantiles,
    value_of,
)

VALUES = [*range(0, 3000), 10_000, 65_535, 1_000_000, 3_600_000, 2**32 - 1]


def test_small_values_are_exact_and_larger_ones_within_the_bound():
    for value in VALUES:
        read_back = value_of(key_of(value))
        if value <= EXACT_UP_TO:
            assert read_back == value
        else:
            assert abs(read_back - value) <= RELATIVE_ERROR * value, value


def test_keys_are_monotonic_and_fit_uint16():
    keys = [key_of(v) for v in VALUES]
    assert keys == sorted(keys) and keys[-1] < 2**16


def test_p95_of_keys_is_within_the_bound_of_the_exact_p95():
    rng = random.Random(7)
    for _ in range(2000):
        values = [
            rng.choice([rng.randint(0, 200), rng.randint(0, 5000), rng.randint(0, 10**6)])
            for _ in range(rng.randint(1, 60))
        ]
        exact = float(np.quantile(values, 0.95))  # numpy's linear = quantileExactInclusive
        keys = sorted(set(key_of(v) for v in values))
        counts = [sum(key_of(v) == k for v in values) for k in keys]
        assert abs(quantile(keys, counts, 0.95) - exact) <= RELATIVE_ERROR * exact + 1e-9


def test_quantiles_of_many_split_histograms_equal_one_at_a_time():
    rng = random.Random(11)
    histograms, expected = [], []
    for _ in range(500):
        values = [rng.randint(0, 10**5) for _ in range(rng.randint(0, 30))]
        keys = sorted(set(key_of(v) for v in values))
        counts = [sum(key_of(v) == k for v in values) for k in keys]
        expected.append(quantile(keys, counts, 0.95))
        parts = [
            (k, 1) for k, n in zip(keys, counts, strict=True) for _ in range(n)
        ]  # one entry per value
        rng.shuffle(parts)
        histograms.append(([k for k, _ in parts], [c for _, c in parts]))
    assert quantiles(histograms, 0.95) == pytest.approx(expected, nan_ok=True)


@pytest.mark.clickhouse
def test_sql_keys_equal_python_keys(store):
    sql = (
        f"SELECT v, {key_sql('v')} FROM (SELECT toUInt32(arrayJoin({{values:Array(UInt32)}})) AS v)"
    )
    rows = store.client.query(sql, parameters={"values": VALUES}).result_rows
    assert [(v, int(k)) for v, k in rows] == [(v, key_of(v)) for v in VALUES]
