"""Helpers shared by the package tests (the fixtures are in conftest.py)."""

from __future__ import annotations

from toolkit.package import package_images, size_package


def packaged(c, target=None, model=None):
    return size_package(c.schedule, c.exchange, c.tiles, target or c.target, model)


def repeat2_images(placed):
    """The placed repeat2 case and its package images."""
    c, pkg, _, p = placed["repeat2"]
    return c, package_images(pkg, c.schedule.objects, p.placement, c.target)
