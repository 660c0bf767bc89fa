"""hangar/_hangar.pyi says what the extension is, so that mypy's checks of the
package's calls into it are checks against the real thing.

The stub is written by hand; these tests keep it from drifting: it declares
exactly the extension's names, each function with the extension's number of
arguments, each constant with its type, each dict a helper builds with the
keys hangar.i puts in it; and the package calls nothing it does not declare.
"""

import ast
import glob
import os
import re

import pytest

import hangar
from hangar import _hangar


def root():
    return os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")


def read(*path):
    with open(os.path.join(root(), *path)) as f:
        return f.read()


STUB = ast.parse(read("bindings", "python", "hangar", "_hangar.pyi"))
FUNCS = {n.name: n for n in STUB.body if isinstance(n, ast.FunctionDef)}
CONSTS = {n.target.id: n.annotation for n in STUB.body
          if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
CLASSES = {n.name: n for n in STUB.body if isinstance(n, ast.ClassDef)}
ALIASES = {t.id for n in STUB.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def extension_names():
    return {n for n in dir(_hangar) if not n.startswith("_")}


def test_the_stub_declares_exactly_the_extension():
    ext = extension_names()
    assert len(ext) > 150
    declared = set(FUNCS) | set(CONSTS)
    assert not ext - declared, f"in the extension, not in _hangar.pyi: {sorted(ext - declared)}"
    assert not declared - ext, f"in _hangar.pyi, not in the extension: {sorted(declared - ext)}"
    # A module __getattr__ would make every undeclared name Any again.
    assert "__getattr__" not in FUNCS
    for name in FUNCS:
        assert callable(getattr(_hangar, name)), name
    for name in CONSTS:
        assert not callable(getattr(_hangar, name)), name


def test_names_only_for_type_checking_are_marked_so():
    # Classes and aliases of the stub do not exist at run time: private
    # names, and each class says so with @type_check_only.
    for name, node in CLASSES.items():
        assert name.startswith("_"), name
        assert not hasattr(_hangar, name), name
        assert any(isinstance(d, ast.Name) and d.id == "type_check_only" for d in node.decorator_list), name
    for name in ALIASES:
        assert name.startswith("_") and not hasattr(_hangar, name), name


def test_constants_have_their_types():
    for name, ann in CONSTS.items():
        assert isinstance(ann, ast.Name), name
        assert ann.id == type(getattr(_hangar, name)).__name__, f"{name}: {ann.id}"


def arity(fn):
    """How many arguments an extension function takes, from SWIG's own check."""
    with pytest.raises(TypeError) as ei:
        fn(*([None] * 99))  # rejected before anything runs: too many
    msg = str(ei.value)
    if "takes no arguments" in msg:
        return 0
    if "takes exactly one argument" in msg:
        return 1
    m = re.search(r"expected (?:at most )?(\d+) arguments", msg)
    assert m, msg
    return int(m.group(1))


def test_functions_take_the_extension_s_arguments():
    wrong = {}
    for name, node in FUNCS.items():
        a = node.args
        assert not (a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs), name
        n = arity(getattr(_hangar, name))
        if n != len(a.args):
            wrong[name] = (len(a.args), n)
    assert not wrong, f"(stub, extension) argument counts differ: {wrong}"


def package_calls():
    """Every name of the extension that a module of the package uses."""
    names = set()
    for path in glob.glob(os.path.join(root(), "bindings", "python", "hangar", "*.py")):
        with open(path) as f:
            src = f.read()
        aliases = {"_hangar"} | set(re.findall(r"from \. import _hangar as (\w+)", src))
        assert not re.search(r"import hangar\._hangar|from \._hangar import|getattr\((?:_h|_hangar),", src), \
            f"{path}: reach the extension as _h.name, so that the stub and this test see it"
        for alias in aliases:
            names |= set(re.findall(r"\b" + alias + r"\.(\w+)", src))
    return names


def test_everything_the_package_calls_is_declared():
    used = package_calls()
    assert len(used) > 50
    missing = used - set(FUNCS) - set(CONSTS)
    assert not missing, f"the package uses names _hangar.pyi does not declare: {sorted(missing)}"
    assert not used - extension_names()


# Each dict the stub describes, and the C function of hangar.i that builds it.
BUILDERS = {
    "_ErrorDetails": "raise_error",
    "_SandboxInfoDict": "d_sandbox_info",
    "_FileInfoDict": "d_file_info",
    "_MetricDict": "d_metric",
    "_LogEntryDict": "d_log_entry",
    "_ForkDict": "d_fork",
    "_SessionForkDict": "d_session_fork",
    "_CheckpointInfoDict": "d_checkpoint_info",
    "_SessionInfoDict": "d_session_info",
    "_TierDict": "d_tier",
    "_EnvironmentDict": "d_environment",
    "_PublishDict": "d_publish",
    "_TemplateDict": "d_template",
    "_SnapshotDict": "d_snapshot",
    "_ImageDict": "d_image",
    "_ReapDict": "py_ctx_reap",
}


def c_function(src, name):
    m = re.search(r"^static [\w ]+\*?" + name + r"\(.*?^}$", src, re.S | re.M)
    assert m, f"no function {name} in hangar.i"
    return m.group(0)


def test_dicts_have_the_keys_the_extension_puts_in_them():
    src = read("bindings", "python", "hangar.i")
    typed = {name: node for name, node in CLASSES.items()
             if any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases)}
    assert set(typed) == set(BUILDERS), "a TypedDict of the stub has no builder listed here, or one is gone"
    for name, fn in BUILDERS.items():
        body = c_function(src, fn)
        strings = set(re.findall(r"PUT_S\(d, \w+, (\w+)\)", body))
        ints = set(re.findall(r"PUT_[IU]\(d, \w+, (\w+)\)", body))
        keys = strings | ints | set(re.findall(r'dput\(d, "(\w+)"', body))
        if 'Py_BuildValue("{' in body:
            keys |= set(re.findall(r'"([a-z_]+)"', body))
        fields = {s.target.id: ast.unparse(s.annotation) for s in typed[name].body if isinstance(s, ast.AnnAssign)}
        assert set(fields) == keys, f"{name} ({fn}): stub {sorted(fields)}, extension {sorted(keys)}"
        for k in strings:
            assert fields[k] in ("str", "Optional[str]"), f"{name}.{k}: {fields[k]}"
        for k in ints:
            assert fields[k] == "int", f"{name}.{k}: {fields[k]}"


def test_the_package_s_constants_are_the_library_s():
    # The package spells the public constants without the prefix; each is
    # the extension's value (the header's), so that a renumbering shows.
    pairs = {
        "STDOUT": "HANGAR_STREAM_STDOUT", "STDERR": "HANGAR_STREAM_STDERR", "PTY": "HANGAR_STREAM_PTY",
        "RUNNING": "HANGAR_SANDBOX_RUNNING", "PAUSED": "HANGAR_SANDBOX_PAUSED",
        "SIGTERM": "HANGAR_SIGTERM", "SIGKILL": "HANGAR_SIGKILL",
        "HOOK_PARK": "HANGAR_SESSION_HOOK_PARK", "HOOK_WAKE": "HANGAR_SESSION_HOOK_WAKE",
        "HOOK_COLD": "HANGAR_SESSION_HOOK_COLD",
    }
    for prefix in ("FILE_", "LOG_", "SESSION_", "RESUME_", "FORK_", "SETTING_"):
        pairs.update({n: "HANGAR_" + n for n in hangar.__all__ if n.startswith(prefix)})
    for py, c in sorted(pairs.items()):
        assert getattr(hangar, py) == getattr(_hangar, c), f"hangar.{py} != {c}"
    # The capability bits are macros SWIG does not wrap: from the header.
    caps = dict(re.findall(r"#define HANGAR_(CAP_\w+)\s+\(UINT64_C\(1\) << (\d+)\)", read("include", "hangar",
                                                                                        "provider.h")))
    assert caps and {n for n in hangar.__all__ if n.startswith("CAP_")} == set(caps)
    for name, bit in caps.items():
        assert getattr(hangar, name) == 1 << int(bit), name
