"""Unit parsing: SI and binary prefixes, bits and bytes, durations, and the errors users see."""
import pytest
from hypothesis import given, strategies as st

from simdist.errors import ScenarioError
from simdist.units import (format_bandwidth, format_duration, format_size, parse_bandwidth, parse_duration,
                           parse_flops, parse_size)


@pytest.mark.parametrize("text, expected", [
    ("25 MB", 25e6), ("25 MiB", 25 * 2**20), ("25MB", 25e6), ("1 GiB", 2**30), ("8 Gb", 1e9),
    ("1 kB", 1e3), ("1 KiB", 1024), ("512 B", 512), ("1.5 TB", 1.5e12), ("16 b", 2),
])
def test_sizes(text, expected):
    assert parse_size(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, expected", [
    ("200 Gb/s", 25e9), ("400 GB/s", 400e9), ("100 Mb/s", 12.5e6), ("1 Tb/s", 125e9), ("1.5 GiB/s", 1.5 * 2**30),
])
def test_bandwidths(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


@pytest.mark.parametrize("text, expected", [
    ("1.5 us", 1.5e-6), ("2 ms", 2e-3), ("3 s", 3.0), ("30 min", 1800.0), ("2 h", 7200.0), ("100 ns", 1e-7),
    ("1 d", 86400.0), ("0 s", 0.0),
])
def test_durations(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


def test_flops():
    assert parse_flops("312 TFLOP/s") == pytest.approx(312e12)


@pytest.mark.parametrize("value, fragment", [
    ("100Gbps", "did you mean '100 Gb/s'"),
    (100, "bare number"),
    ("100", "unit is missing"),
    ("fast", "expected a bandwidth"),
    ("-5 Gb/s", "positive"),
    ("10 furlongs/s", "unknown unit"),
])
def test_bandwidth_errors_name_path_value_and_expectation(value, fragment):
    with pytest.raises(ScenarioError) as e:
        parse_bandwidth(value, "cluster.nodes.0.nic.bandwidth")
    msg = str(e.value)
    assert msg.startswith("cluster.nodes.0.nic.bandwidth:")
    assert fragment in msg
    assert "Gb/s" in msg  # names the expected unit


@pytest.mark.parametrize("parse, value, meant", [
    (parse_bandwidth, "100 gb/s", ["'100 Gb/s'", "'100 GB/s'"]),  # bits or bytes: 8x apart, both offered
    (parse_bandwidth, "100 gbit", ["'100 Gb/s'"]),
    (parse_bandwidth, "100 gbps", ["'100 Gb/s'"]),
    (parse_bandwidth, "400 GBps", ["'400 GB/s'"]),
    (parse_size, "8 gbit", ["'8 Gb'"]),
    (parse_size, "25 mib", ["'25 MiB'"]),
    (parse_duration, "5 usec", ["'5 us'"]),
])
def test_misspelt_units_suggest_what_was_meant(parse, value, meant):
    with pytest.raises(ScenarioError) as e:
        parse(value, "k")
    hint = str(e.value).split("did you mean ")[1].split("?")[0]
    assert hint.split(" or ") == meant


def test_negative_size_and_zero_size_rejected():
    with pytest.raises(ScenarioError, match="positive"):
        parse_size("-1 MB", "communication.bucket_size")
    with pytest.raises(ScenarioError, match="positive"):
        parse_size("0 MB", "communication.bucket_size")
    assert parse_size("0 MB", allow_zero=True) == 0


def test_size_given_as_bandwidth_is_an_error():
    with pytest.raises(ScenarioError, match="unknown unit"):
        parse_size("25 MB/s", "communication.bucket_size")


@given(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False), st.sampled_from(["B", "kB", "MB", "GB", "KiB", "MiB", "GiB"]))
def test_size_roundtrip_scale(x, unit):
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 2**20, "GiB": 2**30}[unit]
    assert parse_size(f"{x!r} {unit}") == pytest.approx(x * scale)


@given(st.text(max_size=20))
def test_parsers_raise_only_scenario_errors(text):
    for parse in (parse_size, parse_bandwidth, parse_duration, parse_flops):
        try:
            parse(text, "x")
        except ScenarioError:
            pass


def test_formatting():
    assert format_bandwidth(25e9) == "200 Gb/s"
    assert format_bandwidth(300e9, bits=False) == "300 GB/s"
    assert format_size(25e6) == "25 MB"
    assert format_duration(1.5e-6) == "1.5 us"
    assert format_duration(1800) == "30 min"
