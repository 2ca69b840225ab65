"""A load racing replacements of the same case directory sees one whole case or fails by name, never the old
case's manifest with the new case's tables and profile (issue 40 item 1)."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time

import pytest

import toolkit
from toolkit.artifacts import load_case, write_case
from toolkit.errors import FormatError
from toolkit.files.replace import make_tmp, replace_dir
from toolkit.profile import Profile


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """Two complete cases of the same workload that differ in a table and in their profile."""
    c = toolkit.compile("mlp-small-repeat")
    p = c.profile
    root = tmp_path_factory.mktemp("versions")
    samples = p.samples.head(p.samples.height // 2)
    activities = p.activities.join(samples.select("tile", "sample"), on=["tile", "sample"], how="semi")
    half = Profile(samples=samples, activities=activities, metadata=p.metadata, clock_hz=p.clock_hz,
                   schema_version=p.schema_version, source=p.source)
    a = write_case(c, root / "a", profile=p, capnp="none")
    b = write_case(dataclasses.replace(c, images=c.images.head(7)), root / "b", profile=half, capnp="none")
    return {"a": a, "b": b}


def _version(case) -> tuple[str, str, int, int]:
    """What a case holds: (its manifest's hash of the images table, the same of the profile's samples, the
    rows of both as read)."""
    files = case.manifest["files"]
    return (files["tables/package.images.parquet"]["sha256"], files["profile/samples.parquet"]["sha256"],
            case.tables["package.images"].height, case.profile.samples.height)


@pytest.mark.parametrize(("replacements", "seconds"), [
    (30, 4.0), pytest.param(200, 30.0, marks=pytest.mark.slow)])
def test_loads_during_overwrites_never_mix_two_cases(tmp_path, versions, replacements, seconds) -> None:
    whole = {tuple(_version(load_case(d))) for d in versions.values()}
    assert len(whole) == 2   # the two versions differ in both the table and the profile
    out = tmp_path / "mlp-small-repeat"
    shutil.copytree(versions["a"], out)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(replacements):
                if stop.is_set():
                    return
                tmp = make_tmp(out)
                tmp.rmdir()
                shutil.copytree(versions["ab"[i % 2]], tmp)
                replace_dir(tmp, out)   # what write_case(..., overwrite=True) does with its finished case
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=writer)
    start = time.monotonic()
    thread.start()
    loads, refused, mixed = 0, [], []
    try:
        while not stop.is_set() and time.monotonic() - start < seconds:
            try:
                case = load_case(out)
            except FormatError as exc:   # fails by name: it never returns half of one case
                refused.append(exc)
                continue
            loads += 1
            if _version(case) not in whole:
                mixed.append(_version(case))
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert not mixed, f"{len(mixed)} of {loads} loads mixed two cases: {mixed[:3]}"
    assert loads > 0, refused[:3]
    for exc in refused:   # every refusal names the case and says what happened
        assert exc.field is not None, exc
