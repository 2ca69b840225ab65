"""A scheduler address is checked before any work (no dataset folder made, no connection tried): the scheme is
one the sweep supports, the host and port are there and the port is in range; each refusal names the address."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.errors import OptionError
from toolkit.sweep import sweep
from toolkit.sweep.engines import check_scheduler

runner = CliRunner()

BAD = [
    ("tls://10.0.0.5:8786", r"the scheme 'tls://' is not supported \(supported: tcp://\); TLS needs certificates"),
    ("inproc://x", r"the scheme 'inproc://' is not supported .*inproc scheduler lives inside another process"),
    ("ucx://10.0.0.5:8786", r"the scheme 'ucx://' is not supported"),
    ("http://10.0.0.5:8786", r"the scheme 'http://' is not supported"),
    ("tcp://", r"names no host"),
    ("tcp://:8786", r"names no host"),
    ("tcp://10.0.0.5", r"names no port .*tcp://10.0.0.5:8786"),
    ("10.0.0.5", r"names no port"),
    ("tcp://10.0.0.5:0", r"has port 0, outside 1..65535"),
    ("tcp://10.0.0.5:70000", r"the port '70000' is not a number from 1 to 65535"),
    ("tcp://10.0.0.5:http", r"the port 'http' is not a number from 1 to 65535"),
    ("tcp://10.0.0.5:8786/status", r"nothing after the port"),
    ("", r"names no host"),
]


@pytest.mark.parametrize(("address", "match"), BAD)
def test_a_bad_address_is_refused_by_name(address, match) -> None:
    with pytest.raises(OptionError, match=match) as err:
        check_scheduler(address)
    assert err.value.field == "scheduler" and err.value.value == address


@pytest.mark.parametrize("scheduler", [8786, b"tcp://x:1", ["tcp://x:1"]])
def test_a_scheduler_that_is_not_an_address_or_client_is_refused(scheduler) -> None:
    with pytest.raises(OptionError, match="must be an address such as"):
        check_scheduler(scheduler)


@pytest.mark.parametrize(("address", "normal"), [
    ("tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"), ("10.0.0.5:8786", "tcp://10.0.0.5:8786"),
    ("TCP://host:1", "tcp://host:1"), ("tcp://[::1]:8786", "tcp://[::1]:8786"), ("localhost:65535", "tcp://localhost:65535"),
])
def test_good_addresses_pass(address, normal) -> None:
    assert check_scheduler(address).lower() == normal.lower()


@pytest.mark.parametrize(("address", "match"), BAD[:3] + BAD[6:7])
def test_the_cli_exits_2_before_making_the_dataset_folder(tmp_path, address, match) -> None:
    out = tmp_path / "ds"
    r = runner.invoke(app, ["sweep", "mlp-small-repeat", "--grid", "row_block=18", "--scheduler", address,
                            "--out", str(out), "-q"])
    assert r.exit_code == 2, (r.output, r.exception)
    assert "scheduler" in r.output and address in r.output and not out.exists()


def test_the_library_refuses_before_the_dataset_folder_too(tmp_path) -> None:
    with pytest.raises(OptionError, match="'tls://' is not supported"):
        sweep(["mlp-small-repeat"], {"row_block": [18]}, scheduler="tls://h:1", out=tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
