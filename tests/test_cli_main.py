import json

from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.cli.compile import parse_option

runner = CliRunner()


def test_workloads_and_graph():
    r = runner.invoke(app, ["workloads", "--json"])
    assert r.exit_code == 0 and "mlp-small-repeat" in r.stdout
    r = runner.invoke(app, ["graph", "encoder-b8", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["name"] == "attn.ln"


def test_compile_json_and_case(tmp_path):
    out = tmp_path / "cases" / "mlp-small-repeat"
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "-o", "row_block=36", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)[0]
    assert summary["row_block"] == 36 and summary["placed"] is True
    assert (out / "manifest.json").exists()
    r = runner.invoke(app, ["artifacts", "check", str(tmp_path)])
    assert r.exit_code == 0 and "consistent" in r.stdout


def test_bad_input_exits_2_with_the_field():
    r = runner.invoke(app, ["compile", "mlp-single-b3"])
    assert r.exit_code == 2 and "unknown workload 'mlp-single-b3'" in r.output
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "-o", "rowblock=3"])
    assert r.exit_code == 2 and "unknown option 'rowblock'" in r.output
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "-o", "row_block"])
    assert r.exit_code == 2 and "must look like key=value" in r.output


def test_parse_option_values():
    assert parse_option("row_block=18") == ("row_block", 18)
    assert parse_option("fused_qkv=true") == ("fused_qkv", True)
    assert parse_option("row_blocks=8,16") == ("row_blocks", (8, 16))
    assert parse_option("weight_class=standard") == ("weight_class", "standard")


def test_sweep_command(tmp_path):
    r = runner.invoke(app, ["sweep", "mlp-small-repeat", "-g", "row_block=24,48", "--workers", "1", "--json",
                            "--out", str(tmp_path / "ds")])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [row["opt_row_block"] for row in rows] == [24, 48]
    assert list((tmp_path / "ds").glob("*.parquet"))


def test_compile_prints_what_each_number_is():
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "-o", "simulate=false"])
    assert r.exit_code == 0, r.output
    for kind in ("screen estimate", "refined estimate", "lowered estimate", "placed", "count"):
        assert kind in r.output
    assert "plans" in r.output and "measured on hardware" not in r.output   # no hardware figure for this preset


def _commands(group, path=()):
    """Every (path, click command) under the CLI's click group."""
    import click
    for name, cmd in group.commands.items():
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def test_every_help_text_shows_its_brackets_whole():
    """Rich reads `[grid]` as a style tag and prints nothing ('a  table'): every help text, its bracketed
    words escaped, prints them as written."""
    import re

    import typer
    group = typer.main.get_command(app)
    tags = re.compile(r"(?<!\\)\[[A-Za-z/#][^\]\s]*\]")   # rich markup: [bold], [/], [grid]; not [...] or [a, b)
    for path, cmd in _commands(group):
        helps = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        assert not [h for h in helps if tags.search(h)], (path, [h for h in helps if tags.search(h)])
        if path == ("sweep",):
            r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
            assert "a [grid] table" in r.stdout
