"""The extension is built, imports, and reaches the library."""

import os

import pytest

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


# Exports the package does not call, each for a reason.
NOT_FOR_PYTHON = {
    "hangar_provider_register": "a provider is a table of C functions (hangar/sys/provider.h)",
    "hangar_ctx_ref": "a Context holds the one reference Python needs; children hold theirs in C",
    "hangar_process_ref": "one Process object per handle",
    "hangar_provider_ref": "providers are described, never kept (ProviderInfo)",
    "hangar_error_last": "read by the extension right after every failing call: the exception's fields",
    "hangar_strerror": "exceptions carry the library's message",
    "hangar_error_name": "each class has the name of its code (test_errors checks it)",
    "hangar_version": "hangar.__version__ is the version the package was built with",
    "hangar_version_number": "as hangar_version",
}


def test_every_export_reaches_python():
    # A function added to the library fails this until the package offers
    # it (through the generated layer or a helper of hangar.i) or it is
    # listed above with a reason.
    import glob
    import re

    root = os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "libhangar", "libhangar.sym")) as f:
        exports = {e for e in re.findall(r"\b(hangar_[a-z0-9_]+);", f.read()) if not e.startswith("hangar_sys_")}
    assert len(exports) > 100
    with open(os.path.join(root, "bindings", "python", "hangar.i")) as f:
        interface = f.read()
    helpers = re.sub(r"%ignore \w+;", "", interface)
    helpers = helpers[helpers.index("---- callbacks"):]
    ignored = set(re.findall(r"%ignore (hangar_\w+);", interface))
    package = ""
    for path in glob.glob(os.path.join(root, "bindings", "python", "hangar", "*.py")):
        with open(path) as f:
            package += f.read()
    called = set(re.findall(r"_h\.(hangar_\w+)", package))
    helper_names = set(re.findall(r"_h\.(py_\w+)", package))
    missing = []
    for e in sorted(exports):
        if e in NOT_FOR_PYTHON or e in called:
            continue
        if re.search(r"\b" + e + r"\(", helpers) and any(
                re.search(r"static PyObject \*" + h + r"\((?:(?!\n}\n).)*\b" + e + r"\(", helpers, re.S)
                for h in helper_names):
            continue
        if e.endswith("_opts_init") and e in ignored:
            continue  # the helpers fill their option structs with the _INIT macros
        missing.append(e)
    assert not missing, f"exported but not reachable from the package: {missing}"
    for e in NOT_FOR_PYTHON:
        assert e in exports, f"{e} is no longer exported: drop it from NOT_FOR_PYTHON"


def test_store_and_reaper_lease(ctx):
    ctx.ping_store()
    r = ctx.reap_as_leader("py-reaper", 60)
    assert r.leader and r.lease_expires_us > 0
    other = hangar.Context()
    assert not other.reap_as_leader("py-reaper", 60).leader
    assert not other.release_lease("py-reaper")
    assert ctx.release_lease("py-reaper")
    assert other.reap_as_leader("py-reaper", 60).leader
    with pytest.raises(hangar.InvalidArgumentError):
        ctx.reap_as_leader("bad lease name!", 60)


def package_imports():
    """Each module of the package and the modules of it it imports when it runs.

    Imports under `if TYPE_CHECKING:` are left out (they never run); an
    import anywhere else counts, in a function too.
    """
    import ast
    import glob

    root = os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    graph, nested = {}, []
    for path in glob.glob(os.path.join(root, "bindings", "python", "hangar", "*.py")):
        name = os.path.basename(path)[:-3]
        with open(path) as f:
            tree = ast.parse(f.read())
        deps = set()

        def visit(node, depth):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                for n in node.orelse:
                    visit(n, depth)
                return
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found = {node.module} if node.module else {a.name for a in node.names}
                deps.update(found)
                if depth:
                    nested.append(f"{name}: {sorted(found)}")
            inner = depth + isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, inner)

        visit(tree, 0)
        graph[name] = deps - {"_hangar"}
    return graph, nested


def test_the_package_has_no_import_cycle():
    graph, nested = package_imports()
    assert {"context", "sandbox", "process", "session", "aio"} <= set(graph)
    # Imports are at the top of a module, where an order between modules shows.
    assert not nested, f"imports inside functions: {nested}"
    state = {}

    def cycle(m, path):
        state[m] = "open"
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                return path + [m, d]
            if d not in state:
                found = cycle(d, path + [m])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = cycle(m, [])
            assert not found, "import cycle: " + " -> ".join(found)
    # The layers, lowest first: each imports only below it.
    assert "sandbox" not in graph["context"] and "session" not in graph["context"]
    assert "sandbox" not in graph["process"] and "sandbox" not in graph["commands"]


def test_pip_builds_the_same_version_and_every_module():
    # bindings/python/meson.build (pip's) says its version; it is the project's.
    import re

    root = os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")

    def read(*p):
        with open(os.path.join(root, *p)) as f:
            return f.read()

    def version(text):
        return re.search(r"^project\([^)]*?version : '([^']+)'", text, re.S | re.M).group(1)

    assert version(read("bindings", "python", "meson.build")) == version(read("meson.build"))
    assert hangar.__version__ == version(read("meson.build"))
    # Both builds install the one list of hangar/meson.build: every module is on it.
    listed = set(re.findall(r"'([\w.]+)'", re.search(r"hangar_py_sources = \[(.*?)\]",
                                                      read("bindings", "python", "hangar", "meson.build"),
                                                      re.S).group(1)))
    present = {f for f in os.listdir(os.path.join(root, "bindings", "python", "hangar"))
               if f.endswith((".py", ".pyi")) or f == "py.typed"}
    assert listed == present
