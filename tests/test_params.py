"""`name=value` parameters: the lab form's rules (params.ts), shared by the CLI, the magic and the widgets."""

from __future__ import annotations

import argparse
import json

import pytest

from jupyter_gpusched.params import ParamError, param_arg, parse_assignment, parse_lines, parse_value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-3", 0.001),
        ("0.1", 0.1),
        ("3", 3),
        ("-2", -2),
        ("+5", 5),
        (".5", 0.5),
        ("None", None),
        ("null", None),
        ("True", True),
        ("false", False),
        ("'adam'", "adam"),
        ('"a b"', "a b"),
        ("[1, 2]", [1, 2]),
        ("{'a': [1, None], 'b': True}", {"a": [1, None], "b": True}),
        ("[true, null]", [True, None]),  # JSON, which is no Python literal
        ("  7  ", 7),
        ("", ""),
    ],
)
def test_a_literal_becomes_its_value(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_a_float_typed_whole_stays_a_float_in_the_json_sent():
    assert json.dumps({"x": parse_value("3.0"), "y": parse_value("1e3")}) == '{"x": 3.0, "y": 1000.0}'


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-01",  # crashed the CLI and the magic before (YAML read a date JSON cannot send)
        "adam",
        "a b",
        "1+2",
        "(1, 2)",  # a tuple would come back as a list: kept as typed, as the lab form does
        "{1, 2}",
        "{1: 2}",
        "b'x'",
        "1j",
        "1e400",
        "nan",
        "0x10",  # not a number to the lab form either
        "1_000",
        "[1, 2",
    ],
)
def test_anything_else_stays_the_string_typed(text):
    assert parse_value(text) == text.strip()


def test_an_assignment_splits_at_the_first_equals_sign():
    assert parse_assignment(" lr =1e-3") == ("lr", 0.001)
    assert parse_assignment("expr=a=b") == ("expr", "a=b")
    assert parse_assignment("empty=") == ("empty", "")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("noequals", "parameter 'noequals' must look like name=value"),
        ("x-y=1", "parameter name 'x-y' is not a valid Python identifier (in 'x-y=1')"),
        ("2x=1", "parameter name '2x' is not a valid Python identifier"),
        ("=1", "parameter name '' is not a valid Python identifier"),
        ("class=1", "parameter name 'class' is a Python keyword (in 'class=1')"),
    ],
)
def test_a_bad_parameter_is_one_clear_line(text, message):
    with pytest.raises(ParamError) as caught:
        parse_assignment(text)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    with pytest.raises(argparse.ArgumentTypeError, match="parameter"):
        param_arg(text)


def test_lines_skip_blanks_and_comments_and_keep_hashes_in_quotes():
    text = "x=1\n\n# a comment\nname=abc  # trailing\ntag='#1'\nx=2\n"
    assert parse_lines(text) == {"x": 2, "name": "abc", "tag": "#1"}


def test_a_bad_line_is_named_by_its_number():
    with pytest.raises(ParamError, match="parameter line 2 must look like name=value"):
        parse_lines("x=1\noops")
    with pytest.raises(ParamError, match="parameter line 1: parameter name 'for' is a Python keyword"):
        parse_lines("for=1")
