"""The package is its layer diagram: format <- io <- ops <- cli (docs/ARCHITECTURE.md).

Every rule is read from the source with ``ast`` (nothing is imported), and each
test names every offender, so a failure says what remains to fix.

- format/ imports nothing of ckptool but ckptool.errors and ckptool.format.*,
  and does no file I/O;
- io/ imports format, io and errors; ops/ imports format, io, ops and errors;
  cli/ may import anything; errors.py imports nothing of ckptool; the package
  root (ckptool/__init__.py) is the library API and does not import cli;
- no import cycles between modules, function-level imports and imports under
  ``if TYPE_CHECKING:`` included (a cycle of types is a cycle of concepts);
- no function over 80 lines (``def`` to its last line, docstring included);
- ruff's SLF001 (no private member reached across objects) is selected;
- "is this storage local?" is asked only inside io/ (no ``is LOCAL``, ``x.local``,
  ``isinstance(x, LocalDir)`` or ``hasattr(x, "lstat")`` above it: the storage's methods and
  capabilities that say what differs, ``walk_dirs``, ``cheap_rereads``);
- above io/, files are reached through Storage: no builtin ``open`` nor ``os.remove``/``unlink``/
  ``rename`` but what FILE_CALLS_ALLOWED names, each with its reason;
- click and rich only under ckptool/cli; tensorflow nowhere;
- no module over 800 lines (generated *_pb2.py excepted): modules are split by concept, never to fit a
  size; one concept (a codec, a rule table) may take more than 400 lines, none takes 800;
- no ``assert`` in ckptool/ (input checks raise CkptError);
- no test hooks in the product: ckptool/_faults.py does not exist, nothing
  imports it, nothing reads a CRASH/FAULT environment variable;
- the repo stands alone: documents cited in ckptool/ exist in the repo
  (``docs/FORMAT.md §N``, ``README.md``), and each § cited is a section of
  docs/FORMAT.md.
"""

from __future__ import annotations

import ast
import pathlib
import re
from dataclasses import dataclass

PKG = pathlib.Path(__file__).resolve().parent.parent / "ckptool"
MAX_LINES = 800

# Which top-level parts of ckptool each layer may import. A "part" is the
# first component after ``ckptool.``: format, io, ops, cli, errors, ...
ALLOWED = {
    "format": {"format", "errors"},
    "io": {"format", "io", "errors"},
    "ops": {"format", "io", "ops", "errors"},
    "errors": set(),
    # the drop-in stand-ins for other libraries' readers (tf.train): a user of ops, like the root
    "compat": {"format", "io", "ops", "errors", "compat"},
    # python -m ckptool.shim: runs a script with `import tensorflow` resolving to compat
    "shim": {"compat", "errors"},
    # ckptool.verify, .prune ...: the library's operations, thin wrappers over ops/
    "api": {"format", "io", "ops", "errors"},
}
# Inside ops/, the families (sub-packages) form a DAG: which other families each may import.
FAMILIES = {
    "read": set(),
    "write": {"read"},
    "inspect": {"read"},
    # retain -> inspect: prune --verify checks what it keeps by inspect's verify (no cycle: inspect
    # imports read only)
    "retain": {"read", "write", "inspect"},
    "transform": {"read", "write", "retain"},
}
ROOT_FORBIDDEN = {"cli"}  # ckptool/__init__.py: the library API must not pull in click


@dataclass(frozen=True)
class Import:
    module: str  # importing module, e.g. "ckptool.io.base"
    target: str  # imported name, resolved to the deepest existing ckptool module or an external name
    line: int
    type_checking: bool  # inside ``if TYPE_CHECKING:``


def _modules() -> dict[str, pathlib.Path]:
    """Every ckptool module by dotted name."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, pathlib.Path()).name == "__init__.py"


def _resolve(name: str) -> str:
    """The deepest ckptool module a dotted name refers to (``ckptool.io.base.X`` -> ``ckptool.io.base``)."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in MODULES:
            return cand
        parts.pop()
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, tree: ast.AST) -> list[Import]:
    found: list[Import] = []

    def visit(node: ast.AST, tc: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, tc)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module, _resolve(alias.name), node.lineno, tc))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                if not _is_package(module):
                    base = base[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # ``from ckptool.io import base`` imports the module ckptool.io.base
                found.append(Import(module, _resolve(f"{source}.{alias.name}"), node.lineno, tc))
        for child in ast.iter_child_nodes(node):
            visit(child, tc)

    visit(tree, False)
    return found


TREES = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()}
IMPORTS = [imp for name, tree in TREES.items() for imp in _imports(name, tree)]


def _part(module: str) -> str:
    """``ckptool.io.base`` -> ``io``; ``ckptool`` -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PKG.parent)}:{line}"


def _report(title: str, offenders: list[str]) -> str:
    return f"{title} ({len(offenders)}):\n  " + "\n  ".join(offenders)


def test_the_tree_is_found():
    # Guards every test below from passing vacuously on a wrong path.
    assert {"ckptool.errors", "ckptool.cli.main"} <= set(MODULES)
    assert any(_part(m) == "format" for m in MODULES)
    assert any(imp.target.startswith("ckptool.format") for imp in IMPORTS)


def test_imports_point_down_only():
    bad = []
    for imp in IMPORTS:
        if not imp.target.startswith("ckptool"):
            continue
        src, dst = _part(imp.module), _part(imp.target)
        if src in ALLOWED:
            if dst not in ALLOWED[src]:
                bad.append(f"{_where(imp.module, imp.line)}: {src}/ imports {imp.target} "
                           f"({src} may import only {', '.join(sorted(ALLOWED[src])) or 'nothing of ckptool'})")
        elif src == "" and dst in ROOT_FORBIDDEN:
            bad.append(f"{_where(imp.module, imp.line)}: the package root imports {imp.target}")
    assert not bad, _report("imports that point up or sideways (format <- io <- ops <- cli)", bad)


def _family(module: str) -> str | None:
    """``ckptool.ops.retain.prune`` -> ``retain``; a module of ops/ outside every family -> ``""``."""
    parts = module.split(".")
    if parts[:2] != ["ckptool", "ops"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def test_ops_is_families_only():
    loose = [m for m in MODULES if _family(m) == "" and m != "ckptool.ops"]
    unknown = sorted({f for m in MODULES if (f := _family(m)) and f not in FAMILIES})
    assert not loose, _report("modules of ops/ outside a family", loose)
    assert not unknown, _report("families of ops/ not in FAMILIES", unknown)


def test_families_form_a_dag():
    bad = []
    for imp in IMPORTS:
        src, dst = _family(imp.module), _family(imp.target)
        if not src or dst is None or src == dst:
            continue
        if dst not in FAMILIES[src]:
            bad.append(f"{_where(imp.module, imp.line)}: ops/{src} imports {imp.target} "
                       f"(ops/{src} may import {', '.join(sorted(FAMILIES[src])) or 'no other family'})")
    assert not bad, _report("imports between ops families that the DAG does not allow", bad)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a self-loop (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles():
    edges: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], int] = {}
    for imp in IMPORTS:
        if imp.target not in MODULES or imp.target == imp.module:
            continue
        edges.setdefault(imp.module, set()).add(imp.target)
        lines.setdefault((imp.module, imp.target), imp.line)
    bad = []
    for comp in _cycles(edges):
        members = set(comp)
        links = [f"{_where(a, lines[(a, b)])} -> {b}"
                 for a in comp for b in sorted(edges.get(a, ())) if b in members]
        bad.append("cycle among " + ", ".join(comp) + ":\n    " + "\n    ".join(links))
    assert not bad, _report("import cycles (function-level and TYPE_CHECKING imports included)", bad)


def _external(top: str) -> list[Import]:
    return [imp for imp in IMPORTS if imp.target.split(".")[0] == top]


def test_click_and_rich_only_under_cli():
    bad = [f"{_where(imp.module, imp.line)}: imports {imp.target}"
           for top in ("click", "rich") for imp in _external(top) if _part(imp.module) != "cli"]
    assert not bad, _report("click/rich imported outside ckptool/cli", bad)


def test_tensorflow_imported_nowhere():
    bad = [f"{_where(imp.module, imp.line)}: imports {imp.target}"
           for top in ("tensorflow", "tf_keras", "keras") for imp in _external(top)]
    assert not bad, _report("ckptool must never import TensorFlow", bad)


def test_no_module_over_800_lines():
    bad = []
    for path in MODULES.values():
        if path.name.endswith("_pb2.py"):
            continue
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            bad.append(f"{path.relative_to(PKG.parent)}: {n} lines")
    assert not bad, _report(f"modules over {MAX_LINES} lines (more than one concept: split them by concept)", sorted(bad))


def test_no_assert_statements():
    bad = [f"{_where(name, node.lineno)}: assert"
           for name, tree in TREES.items() for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    assert not bad, _report("assert in ckptool/ (python -O drops it; raise a CkptError instead)", bad)


_FAULTY = re.compile(r"CRASH|FAULT", re.IGNORECASE)


def _env_name(node: ast.AST) -> str | None:
    """The variable name read if ``node`` reads the environment with a constant name."""
    def is_environ(expr: ast.AST) -> bool:
        return (isinstance(expr, ast.Attribute) and expr.attr == "environ") or (
            isinstance(expr, ast.Name) and expr.id == "environ")

    arg = None
    if isinstance(node, ast.Call) and node.args:
        f = node.func
        getenv = (isinstance(f, ast.Attribute) and f.attr in ("getenv", "getenvb")) or (
            isinstance(f, ast.Name) and f.id in ("getenv", "getenvb"))
        environ_get = isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault") and is_environ(f.value)
        if getenv or environ_get:
            arg = node.args[0]
    elif isinstance(node, ast.Subscript) and is_environ(node.value):
        arg = node.slice
    elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
        arg = node.left
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def test_no_fault_hooks_in_the_product():
    bad = []
    faults = PKG / "_faults.py"
    if faults.exists():
        bad.append(f"{faults.relative_to(PKG.parent)} exists (test hooks belong under tests/)")
    bad += [f"{_where(imp.module, imp.line)}: imports {imp.target}"
            for imp in IMPORTS if imp.target.split(".")[-1] == "_faults"]
    for name, tree in TREES.items():
        reads = set()
        for node in ast.walk(tree):
            env = _env_name(node)
            if env is not None and _FAULTY.search(env):
                bad.append(f"{_where(name, node.lineno)}: reads ${env}")
                reads.add(node.lineno)
        for node in ast.walk(tree):  # the name held in a constant and read elsewhere
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.lineno not in reads
                    and re.fullmatch(r"CKPTOOL_\w*(CRASH|FAULT)\w*", node.value)):
                bad.append(f"{_where(name, node.lineno)}: names {node.value}")
    assert not bad, _report("test hooks in the product", sorted(set(bad)))


_FILE_IO_MODULES = {"os", "pathlib", "shutil", "tempfile", "io", "fsspec", "glob", "mmap"}


def test_format_does_no_file_io():
    # format/ turns bytes into values and back; files are io/'s job. The
    # protoc wrapper protos/regenerate.py is a developer script, not a codec.
    bad = []
    for name, tree in TREES.items():
        if _part(name) != "format" or name.endswith(".regenerate"):
            continue
        for imp in _imports(name, tree):
            if imp.target.split(".")[0] in _FILE_IO_MODULES:
                bad.append(f"{_where(name, imp.line)}: imports {imp.target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                bad.append(f"{_where(name, node.lineno)}: calls open()")
    assert not bad, _report("file I/O in ckptool/format", bad)


REPO = PKG.parent
_DOC_MENTION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.md)\b")
_SECTION = re.compile(r"§\s*(\d+(?:\.\d+)?)(?:\s*-\s*(\d+))?")


def _format_sections() -> set[str]:
    doc = REPO / "docs" / "FORMAT.md"
    if not doc.exists():
        return set()
    return {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", doc.read_text(encoding="utf-8"),
                                             re.MULTILINE)}


def test_citations_resolve_inside_the_repo():
    # The repo stands alone: a document cited from the code exists in the repo, by
    # its path from the repo root (docs/FORMAT.md, README.md), and a § cited is a
    # section of docs/FORMAT.md (the only numbered document).
    sections = _format_sections()
    bad = []
    for path in sorted(PKG.rglob("*")):
        if path.suffix not in (".py", ".proto") or path.name.endswith("_pb2.py"):
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{no}"
            for m in _DOC_MENTION.finditer(line):
                if not (REPO / m.group(1)).is_file():
                    bad.append(f"{where}: cites {m.group(1)}, not a file of the repo (from its root)")
            if re.search(r"/work/shared|\bshared (FORMAT|CONTRACT|STYLE|PEERS)\b", line):
                bad.append(f"{where}: cites the team's shared notes")
            for m in _SECTION.finditer(line):
                first, last = m.group(1), m.group(2)
                wanted = [first] if last is None else [str(n) for n in range(int(first), int(last) + 1)]
                bad += [f"{where}: §{s} is not a section of docs/FORMAT.md" for s in wanted if s not in sections]
    assert not bad, _report("citations of documents outside the repo", bad)


def test_the_checks_see_what_they_claim_to():
    # The analyzers on small made-up sources, so a rule cannot pass by not looking.
    src = ast.parse(
        "from ckptool.io import base\n"
        "from ckptool.ops.read.reader import open as o\n"
        "def f():\n"
        "    import ckptool.cli.main\n"
        "    from . import layout\n"
        "if TYPE_CHECKING:\n"
        "    from ckptool.ops.write import writer as write\n")
    got = {(i.target, i.type_checking) for i in _imports("ckptool.io.state", src)}
    assert got == {("ckptool.io.base", False), ("ckptool.ops.read.reader", False), ("ckptool.cli.main", False),
                   ("ckptool.io.layout", False), ("ckptool.ops.write.writer", True)}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]] and _cycles({"a": {"b"}}) == []
    reads = [_env_name(n) for n in ast.walk(ast.parse(
        "os.environ.get('CKPTOOL_CRASH_AT')\nos.getenv('X_FAULT')\nos.environ['A']\n'B' in os.environ\n"))]
    assert sorted(r for r in reads if r) == ["A", "B", "CKPTOOL_CRASH_AT", "X_FAULT"]
    assert _SECTION.findall("FORMAT.md §1-4, §7.2") == [("1", "4"), ("7.2", "")]
    assert {"0", "1.3", "4.4", "13"} <= _format_sections()
    assert _family("ckptool.ops.retain.prune") == "retain" and _family("ckptool.ops") == ""
    assert _family("ckptool.io.layout") is None
    # the DAG rule sees an edge it forbids: read may import no other family
    assert "retain" not in FAMILIES["read"] and any(_family(i.module) == "transform" and _family(i.target) == "retain"
                                                   for i in IMPORTS)


def _private_uses(module: str, tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, "ckptool.x._name")`` for every private name of another ckptool module this one
    reaches: ``from ckptool.x import _name``, or ``x._name`` where ``x`` names a ckptool module
    imported here (dunders such as ``__version__`` are public)."""
    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    out: list[tuple[int, str]] = []
    aliases: dict[str, str] = {}  # local name -> the ckptool module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not _is_package(module):
                    base = base[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("ckptool"):
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in MODULES:
                    aliases[alias.asname or alias.name] = full
                elif private(alias.name) and _resolve(source) != module:
                    out.append((node.lineno, full))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in MODULES:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and private(node.attr) and aliases[node.value.id] != module):
            out.append((node.lineno, f"{aliases[node.value.id]}.{node.attr}"))
    return out


def test_no_private_name_imported_from_another_module():
    # A name another module needs is public (no underscore), or it lives where it is used.
    bad = [f"{_where(m, line)}: {name}" for m, tree in TREES.items() for line, name in _private_uses(m, tree)]
    assert not bad, _report("private names used from another module", sorted(bad))


def test_the_private_name_check_sees_both_spellings():
    src = ast.parse("from ckptool.format.encode import _as_dtype, encode_tensor\n"
                    "from ckptool.format import tensors\n"
                    "from ckptool.io.atomic import ANY, __all__\n"
                    "def f():\n"
                    "    return tensors._byteswap, tensors.byteswap\n")
    got = [name for _, name in _private_uses("ckptool.ops.read.v2", src)]
    assert got == ["ckptool.format.encode._as_dtype", "ckptool.format.tensors._byteswap"]


def test_no_test_skips_itself_when_a_module_of_the_package_is_absent():
    # Every module of ckptool is in the tree: a test that probes for one would pass by skipping.
    probe = re.compile(r"find_spec\(\s*f?[\"']ckptool|has\(\s*f?[\"']ckptool")
    tests = PKG.parent / "tests"
    bad = [f"{p.relative_to(PKG.parent)}:{i}" for p in sorted(tests.rglob("*.py")) if p.name != "test_layers.py"
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if probe.search(line)]
    assert not bad, _report("tests that skip when a ckptool module is absent", bad)


# Rules kept in one function (docs/ARCHITECTURE.md): the spelling that would betray a second
# copy, and the only modules where it may appear.
ONE_PLACE = {
    "surrogateescape": ({"ckptool.format.objkeys", "ckptool.compat.reader"},  # compat: a path given as bytes
                        "name <-> key: objkeys.name_of / key_of"),
    "backslashreplace": ({"ckptool.format.objkeys"}, "a key as text: objkeys.shown"),
    ".byteswap()": ({"ckptool.format.tensors"}, "the byte swap: tensors.byteswap"),
    "checksum does not match": ({"ckptool.format.tensors", "ckptool.compat.bundleread"},  # compat: TF's wording
                                "the tensor CRC check: tensors.check_crc_value"),
    ".tempstate{": ({"ckptool.io.safety.atomic"}, "temporary names: atomic.tempstate_name"),
    "uuid4": ({"ckptool.io.safety.atomic", "ckptool.io.safety.dirfd"}, "temporary names: atomic.tempstate_name"),
    "os.replace(": ({"ckptool.io.backends.local", "ckptool.io.safety.dirfd"},
                    "renames: Storage.rename, the atomic write"),
}
NONFINITE = {"NaN", "Infinity", "-Infinity"}


def _code_text(tree: ast.AST) -> str:
    """The module's source without its docstrings and comments (ast.unparse)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()
    return ast.unparse(tree)


def test_each_rule_is_written_in_one_place():
    bad = []
    for m, path in MODULES.items():
        if path.name.endswith("_pb2.py"):
            continue
        code = _code_text(ast.parse(path.read_text(encoding="utf-8")))
        for needle, (owners, rule) in ONE_PLACE.items():
            if needle in code and m not in owners:
                bad.append(f"{path.relative_to(PKG.parent)}: {needle!r} ({rule})")
    assert not bad, _report("a rule written outside its owner", bad)


def test_non_finite_floats_are_spelled_in_json_numbers_only():
    # "NaN"/"Infinity"/"-Infinity" in JSON: format.json_numbers.json_float.
    bad = []
    for m, tree in TREES.items():
        if m == "ckptool.format.json_numbers" or MODULES[m].name.endswith("_pb2.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in NONFINITE and isinstance(node.value, str):
                bad.append(f"{_where(m, node.lineno)}: {node.value!r}")
    assert not bad, _report("non-finite floats spelled outside format/json_numbers", bad)


def test_the_one_place_check_sees_code_not_docstrings():
    code = _code_text(ast.parse('"""a.byteswap() here"""\ndef f(a):\n    """and .tempstate{ here"""\n'
                                '    return a.byteswap(), f"{a}.tempstate{a}"\n'))
    assert code.count(".byteswap()") == 1 and code.count(".tempstate{") == 1


MAX_FUNCTION_LINES = 80


def _long_functions(tree: ast.AST) -> list[tuple[int, str, int]]:
    """(line, name, length) of every function longer than MAX_FUNCTION_LINES, nested ones included."""
    return [(node.lineno, node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_function_over_80_lines():
    bad = [f"{_where(m, line)}: {name} is {n} lines" for m, tree in TREES.items()
           if not MODULES[m].name.endswith("_pb2.py") for line, name, n in _long_functions(tree)]
    assert not bad, _report(f"functions over {MAX_FUNCTION_LINES} lines (split where the concept splits)", bad)


def test_ruff_selects_private_member_access():
    # SLF001: `obj._private` from outside the object's class. ruff reports each one; this pins the selection.
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    conf = tomllib.loads((PKG.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "SLF001" in conf["select"] or "SLF" in conf["select"]
    ignored = {code for key, codes in conf.get("per-file-ignores", {}).items() if key.startswith("ckptool")
               for code in codes}
    assert not ignored & {"SLF", "SLF001"}, "SLF001 must not be switched off for ckptool/"


def _locality_checks(tree: ast.AST) -> list[tuple[int, str]]:
    """Where code asks whether a storage is the local one, in the spellings it has had."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) \
                and any(isinstance(x, ast.Name) and x.id == "LOCAL" for x in [node.left, *node.comparators]):
            out.append((node.lineno, "is LOCAL"))
        elif isinstance(node, ast.Attribute) and node.attr == "local" \
                and not (isinstance(node.value, ast.Name) and node.value.id == "threading"):
            out.append((node.lineno, ".local"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2:
            arg = node.args[1]
            names = {a.id if isinstance(a, ast.Name) else getattr(a, "attr", "")
                     for a in (arg.elts if isinstance(arg, ast.Tuple) else [arg])}
            if node.func.id == "isinstance" and names & {"LocalDir", "LocalStorage"}:
                out.append((node.lineno, "isinstance(..., Local...)"))
            if node.func.id == "hasattr" and isinstance(arg, ast.Constant) and arg.value in {"lstat", "fd"}:
                out.append((node.lineno, f"hasattr(..., {arg.value!r})"))
    return out


def test_storage_locality_is_asked_only_in_io():
    bad = [f"{_where(m, line)}: {what}" for m, tree in TREES.items() if _part(m) != "io"
           for line, what in _locality_checks(tree)]
    assert not bad, _report("storage locality asked above io/ (use the storage's capability)", bad)


#: Above io/, files are reached through Storage (open_reader, read_bytes, open_write, remove, rename,
#: the atomic write): these are the calls that go around it. What must remain, with its reason:
FILE_CALLS_ALLOWED = {
    # tf.io.gfile.GFile: a local file opened in the mode the script asks (w, a, r+), as TF opens it
    ("ckptool.compat.gfile", "open"): "GFile's own modes (write, append) on a local file, as TF's",
    # a developer tool regenerating the repository's man/ and completions/ (python -m ckptool.cli.docs)
    ("ckptool.cli.docs", "open"): "writes the repository's generated docs",
    ("ckptool.cli.docs", "os.remove"): "removes a removed command's generated page from the repository",
    # `ckptool man CMD`: the page handed to man(1) in a TemporaryDirectory of its own
    ("ckptool.cli.commands.man", "open"): "a page for man -l in a private temporary directory",
}
_FILE_CALLS = {"open", "os.remove", "os.unlink", "os.rename"}


def _file_calls(tree: ast.AST) -> list[tuple[int, str]]:
    """``open(...)``, ``os.remove/unlink/rename(...)`` called in a module's code."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else \
            f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name in _FILE_CALLS:
            out.append((node.lineno, name))
    return out


def test_files_are_reached_through_storage_above_io():
    bad = [f"{_where(m, line)}: {what}()" for m, tree in TREES.items() if _part(m) not in ("format", "io")
           and not MODULES[m].name.endswith("_pb2.py")
           for line, what in _file_calls(tree) if (m, what) not in FILE_CALLS_ALLOWED]
    assert not bad, _report("files opened or removed past Storage above io/ (use the Storage's methods)", bad)
    stale = [f"{m}: {what}" for m, what in FILE_CALLS_ALLOWED
             if m not in TREES or what not in {w for _, w in _file_calls(TREES[m])}]
    assert not stale, _report("allowed file calls that no longer happen (drop them from FILE_CALLS_ALLOWED)", stale)


def test_the_structural_checks_see_what_they_claim_to():
    long_src = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "def g():\n    pass\n"
    assert [(n, ln) for _, n, ln in _long_functions(ast.parse(long_src))] == [("f", MAX_FUNCTION_LINES + 1)]
    src = ast.parse("if s is LOCAL: pass\nisinstance(d, LocalDir)\nisinstance(d, (int, io.LocalStorage))\n"
                    "hasattr(st, 'lstat')\nisinstance(d, int)\nif ck.storage.local: pass\nthreading.local()\n")
    calls = ast.parse("open(p)\nos.remove(p)\nos.unlink(p)\nos.rename(a, b)\nstorage.remove(p)\nzf.open(m)\n")
    assert [w for _, w in _file_calls(calls)] == ["open", "os.remove", "os.unlink", "os.rename"]
    assert sorted(w for _, w in _locality_checks(src)) == sorted([
        "is LOCAL", "isinstance(..., Local...)", "isinstance(..., Local...)", "hasattr(..., 'lstat')", ".local"])


def test_one_name_one_concept_inside_ops():
    """Inside ops/, no two modules share a name: one concept, one name (a second ``plan.py`` is a
    second concept wearing the first one's name, or the first one's copy)."""
    seen: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if name.startswith("ckptool.ops.") and path.name != "__init__.py":
            seen.setdefault(path.stem, []).append(name)
    bad = [f"{stem}: {', '.join(sorted(names))}" for stem, names in sorted(seen.items()) if len(names) > 1]
    assert not bad, _report("modules of ops/ sharing a name (give each concept its own)", bad)
