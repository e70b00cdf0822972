"""The package's typed face (issue 51): the wheel ships `py.typed` and the
native module's stub, `_mtrace.pyi`, which must declare exactly what the
extension exports, with its parameters; the examples that `mypy --strict`
checks (pyproject.toml's `[tool.mypy]`, run by run-tests.sh) run; and the
annotations, which the package's modules hold as strings where a type
checker's names are only imported for it, leave the profiled program's code
compiled as under plain python."""

import ast
import importlib.util
import inspect
import os
import sys
import unittest

import mtrace
from mtrace import _mtrace
from test_mtrace import HERE, Case, run

PACKAGE = os.path.dirname(os.path.abspath(mtrace.__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")


def stub():
    """The installed stub's top-level names: {name: ast node}."""
    with open(os.path.join(PACKAGE, "_mtrace.pyi")) as f:
        tree = ast.parse(f.read())
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


def parameters(function):
    """``[(name, has a default)]`` of a stub's function."""
    args = function.args
    positional = args.posonlyargs + args.args
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    return ([(a.arg, d) for a, d in zip(positional, defaults)]
            + [(a.arg, d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)])


class Stubs(unittest.TestCase):
    def test_the_wheel_ships_py_typed_and_the_stub(self):
        for name in ("py.typed", "_mtrace.pyi"):
            self.assertTrue(os.path.isfile(os.path.join(PACKAGE, name)), f"{name} in {PACKAGE}")

    def test_the_stub_declares_what_the_extension_exports(self):
        exported = {name for name in dir(_mtrace) if not name.startswith("_")}
        declared = set(stub())
        self.assertEqual(sorted(exported - declared), [],
                         "exported by the extension but not declared in _mtrace.pyi")
        self.assertEqual(sorted(declared - exported), [],
                         "declared in _mtrace.pyi but not exported by the extension")

    def test_each_function_has_the_stubs_parameters(self):
        for name, node in stub().items():
            if not isinstance(node, ast.FunctionDef):
                continue
            with self.subTest(name):
                signature = inspect.signature(getattr(_mtrace, name))
                actual = [(p.name, p.default is not p.empty)
                          for p in signature.parameters.values()]
                self.assertEqual(parameters(node), actual, f"_mtrace.{name}{signature}")

    def test_classes_are_classes_and_constants_are_not_callable(self):
        for name, node in stub().items():
            value = getattr(_mtrace, name)
            if isinstance(node, ast.ClassDef):
                self.assertIsInstance(value, type, name)
            elif isinstance(node, ast.AnnAssign):
                self.assertFalse(callable(value), name)


class Examples(Case):
    """Each example that mypy checks runs, as its docstring says."""

    def example(self, name):
        return os.path.abspath(os.path.join(EXAMPLES, name))

    def test_per_request(self):
        out = run([sys.executable, self.example("per_request.py")], cwd=self.dir).stdout
        self.assertIn("handle", out)
        self.assertIn("request of", out)

    def test_analyze(self):
        out = run([sys.executable, self.example("analyze.py")], cwd=self.dir).stdout
        self.assertIn("fib:", out)
        self.assertIn("mark 'workers done'", out)

    def test_asyncio_threads(self):
        out = run([sys.executable, self.example("asyncio_threads.py")], cwd=self.dir).stdout
        self.assertIn("{'loop-a': 3, 'loop-b': 3}", out)
        self.assertIn("task loop-a-fetch-0", out)
        self.assertIn("fetch: 6 calls", out)

    def test_threads(self):
        self.mtrace(self.example("threads.py"))

    @unittest.skipIf(importlib.util.find_spec("aiohttp") is None, "needs aiohttp from PyPI")
    def test_aiohttp_threads(self):
        self.mtrace(self.example("aiohttp_threads.py"), "20")


ANNOTATED = """
    def f(x: int) -> None:
        pass

    print(repr(f.__annotations__["x"]))
"""


class ProfiledCode(Case):
    """The package's annotations change nothing in the code it runs: `exec`
    and `compile` inherit their caller's `from __future__` imports."""

    def test_a_script_run_by_python_m_mtrace(self):
        script = self.script("annotated.py", ANNOTATED)
        out = run([sys.executable, "-m", "mtrace", "-o", self.path("t.bin"), script],
                  cwd=self.dir).stdout
        self.assertIn("<class 'int'>", out)

    def test_a_statement_run_by_profile_runctx(self):
        namespace = {}
        mtrace.Profile().runctx("def f(x: int): pass", namespace, namespace)
        self.assertIs(namespace["f"].__annotations__["x"], int)


if __name__ == "__main__":
    unittest.main()
