"""The extension is built, imports, and reaches the library."""

import os

import hangar


def test_import_and_version():
    assert hangar.__version__.count(".") == 2
    assert os.path.basename(hangar._hangar.__file__).startswith("_hangar.")
    # The generated layer is private: the package names no raw function.
    assert not any(n.startswith("hangar_") for n in hangar.__all__)


def test_a_context_reads_settings(ctx):
    assert ctx.get("HANGAR_DEFAULT_PROVIDER") == "local"
    ctx.set("HANGAR_EXEC_TIMEOUT_SECONDS", "42")
    assert ctx.get("HANGAR_EXEC_TIMEOUT_SECONDS") == "42"
    names = {p.name for p in ctx.providers()}
    assert {"local", "e2b"} <= names
