"""Manifests bundled with trio-cap: the last rule of the resolution order.

A package (not a bare data directory) so the ``*.toml`` files ship in the wheel
through ``[tool.setuptools.package-data]`` and are found with
``importlib.resources``.
"""
