"""Every plan syntax reads its counts with one reader: any text parses or raises OptionError naming the field.

The parsers are our labels (``MxNxK/RxC`` and their words, ``batched<N>``), ipu-stack's constraint lines, an
``Options(plans=...)`` value and the CLI's ``-o key=value`` integers. A superscript digit (``str.isdigit`` accepts
it, ``int`` refuses it), a count past Python's integer digit limit and a non-ASCII decimal digit (``int`` reads
it, ipu-stack's ``u16`` parse refuses it) are all refused by name.
"""

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.cli.compile import _value
from toolkit.errors import OptionError
from toolkit.layout.constraints import check_plan_texts, read_constraint
from toolkit.layout.gemm import MAX_COUNT, parse_plan, read_count
from toolkit.options import Options
from toolkit.sweep.points import grid_points

LINE = "0:4x92x4:4x1:48:interleaved:normal:complete:direct"
BIG = "9" * 5000

#: (parser, text, the field the error names)
BAD = [
    (parse_plan, "4⁸x92x4", "plans.?"),
    (parse_plan, "4x92x4/0²x92", "plans.?"),
    (parse_plan, "٤x92x4", "plans.?"),                 # Arabic-Indic four
    (parse_plan, "४x92x4", "plans.?"),                 # Devanagari four
    (parse_plan, f"{BIG}x92x4", "plans.?"),
    (parse_plan, f"4x92x4/16x{BIG}", "plans.?"),
    (parse_plan, f"4x92x4 batched{BIG}", "plans.?"),
    (parse_plan, "4x92x4 batched٢", "plans.?"),
    (parse_plan, "4x92x4 batched²", "plans.?"),
    (parse_plan, "4x92x4 batched0", "plans.?"),
    (read_constraint, LINE.replace("0:", "0²:", 1), "plans.OP"),
    (read_constraint, LINE.replace("0:", "٠:", 1), "plans.OP"),
    (read_constraint, LINE.replace("0:", f"{BIG}:", 1), "plans.OP"),
    (read_constraint, LINE.replace("4x92x4", "4⁸x92x4"), "plans.RxCxK"),
    (read_constraint, LINE.replace("4x92x4", "٤x92x4"), "plans.RxCxK"),
    (read_constraint, LINE.replace("4x92x4", f"4x{BIG}x4"), "plans.RxCxK"),
    (read_constraint, LINE.replace(":4x1:", ":4x¹:"), "plans.RRxRC"),
    (read_constraint, LINE.replace(":48:", ":4⁸:"), "plans.BLOCK"),
    (read_constraint, LINE.replace(":48:", f":{BIG}:"), "plans.BLOCK"),
    (read_constraint, LINE.replace("complete", "batch-٣"), "plans.REDUCTION"),
    (read_constraint, LINE.replace("complete", f"batch-{BIG}"), "plans.REDUCTION"),
    (read_constraint, LINE.replace("complete", "batch-²"), "plans.REDUCTION"),
]


@pytest.mark.parametrize(("parser", "text", "field"), BAD, ids=[f"{p.__name__}-{i}" for i, (p, _, _) in
                                                                 enumerate(BAD)])
def test_bad_counts_are_refused_by_field(parser, text, field):
    with pytest.raises(OptionError) as exc:
        parser(text)
    assert exc.value.field == field
    assert len(str(exc.value)) < 12_000   # the message names the value, shortened where it is huge


@pytest.mark.parametrize(("text", "counts"), [("4x92x4", (4, 92, 4)), ("004x092x04", (4, 92, 4)),
                                              ("4x92x4/16x92 batched2", (4, 92, 4))])
def test_ascii_counts_still_parse(text, counts):
    plan = parse_plan(text)
    assert (plan.m, plan.n, plan.k) == counts


def test_reader_refuses_what_int_reads():
    assert read_count("42", 100) == 42
    assert read_count("٤٢", 100) is None            # int("٤٢") is 42; ipu-stack refuses it
    assert read_count("4²", 100) is None            # "4²".isdigit() is True; int refuses it
    assert read_count("+4", 100) is None and read_count(" 4", 100) is None and read_count("", 100) is None
    assert read_count(BIG, 100) == 101              # past the limit, never given to int()


def test_cli_integers_are_ascii_only():
    assert _value("18") == 18 and _value("-3") == -3 and _value("8,12") == (8, 12)
    assert _value("٣") == "٣" and _value("1²") == "1²" and _value(BIG) == BIG   # text: the option refuses it
    with pytest.raises(OptionError) as exc:
        Options(row_blocks=_value("8,٣"))
    assert exc.value.field == "row_blocks"


def test_sweep_grid_refuses_a_bad_plan_before_it_starts():
    with pytest.raises(OptionError) as exc:
        grid_points({"plans": ["fc1=4x92x4", "fc1=4⁸x92x4"]})
    assert exc.value.field == "plans.fc1"
    with pytest.raises(OptionError) as exc:
        grid_points({"plans": [[LINE.replace("complete", "batch-٣")]]})
    assert exc.value.field == "plans.REDUCTION"
    assert len(grid_points({"plans": ["fc1=4x92x4", [LINE]]})) == 2


_CHARS = st.sampled_from([*list("0123456789x/: -abcdehilnorstwgmpuvf"), "⁸", "²", "٣", "४", "\xa0", "\n", "１"])
_TEXT = st.text(_CHARS, max_size=60) | st.text(max_size=40)


def _label_like():
    count = st.integers(0, 10 ** 7).map(str) | st.sampled_from(["⁸", "٣", "", BIG, "0²", "４"])
    word = st.sampled_from(["", " gathered", " streamed", " batched2", " batched", " batched٣", " batched" + BIG,
                            " rows-fast", " swapped", " standard", " bogus"])
    return st.builds(lambda a, b, c, g, w: f"{a}x{b}x{c}{g}{w}", count, count, count,
                     st.sampled_from(["", "/16x92", "/0x1", "/٣x92", "/4x" + BIG]), word)


def _line_like():
    count = st.integers(0, 70_000).map(str) | st.sampled_from(["⁸", "٣", "", BIG, "0²"])
    return st.builds(lambda op, a, b, c, r1, r2, blk, red: f"{op}:{a}x{b}x{c}:{r1}x{r2}:{blk}:interleaved:normal:"
                                                           f"{red}:direct",
                     count, count, count, count, count, count, count,
                     st.sampled_from(["complete", "streamed", "batch-2", "batch-", "batch-٣", "batch-" + BIG]))


def _parses_or_refuses(parser, text):
    with contextlib.suppress(OptionError):
        parser(text)


@settings(max_examples=300, deadline=None)
@given(_TEXT | _label_like())
def test_any_label_parses_or_raises_option_error(text):
    _parses_or_refuses(parse_plan, text)


@settings(max_examples=300, deadline=None)
@given(_TEXT | _line_like())
def test_any_line_parses_or_raises_option_error(text):
    _parses_or_refuses(read_constraint, text)


@settings(max_examples=200, deadline=None)
@given(_TEXT | _label_like() | _line_like())
def test_any_plans_entry_parses_or_raises_option_error(text):
    """The Options value (entries split at ';' and keyed), then each entry's syntax as a sweep checks it."""
    with contextlib.suppress(OptionError):
        check_plan_texts(Options(plans=f"fc1={text}" if ":" not in text else text).plans)


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_any_cli_value_is_a_value(text):
    value = _value(text)
    assert not isinstance(value, int) or abs(value) <= MAX_COUNT
