"""`python -m mtrace script.py` runs the program as `python script.py`
would (issue 33, first part): the same `__main__` module, `sys.argv`,
`sys.path[0]` and `__spec__`, functions that pickle, and a
`multiprocessing` pool that finds them. Each case prints what the program
sees, under plain `python` and under `python -m mtrace`, and the two must
be equal. (The pool's child processes are not recorded yet.)"""

import json
import os
import sys

from test_mtrace import Case, run

SEES = """
    import json, os, pickle, sys

    def child_work(n):
        return n * n

    def sees():
        main = sys.modules["__main__"]
        spec = main.__spec__
        return {
            "name": __name__,
            "main_is_this_module": main.__dict__ is globals(),
            "file": os.path.abspath(main.__file__),
            "argv": sys.argv,
            "path0": os.path.abspath(sys.path[0]),
            "spec": None if spec is None else [spec.name, os.path.abspath(spec.origin)],
            "package": __package__,
            "pickles": pickle.loads(pickle.dumps(child_work))(7),
            "loader": type(main.__loader__).__name__,
        }

    if __name__ == "__main__":
        print(json.dumps(sees()))
"""

POOL = """
    import multiprocessing, sys

    def child_work(n):
        return n if n < 2 else child_work(n - 1) + child_work(n - 2)

    if __name__ == "__main__":
        context = multiprocessing.get_context(sys.argv[1])
        with context.Pool(2) as pool:
            print(sum(pool.map(child_work, range(15))))
"""


class MainModule(Case):
    def both(self, *args, cwd=None):
        """stdout of `python ARGS` and of `python -m mtrace -o trace.bin ARGS`."""
        cwd = cwd or self.dir
        plain = run([sys.executable, *args], cwd=cwd).stdout
        traced = run([sys.executable, "-m", "mtrace", "-o", self.path("trace.bin"), *args],
                     cwd=cwd).stdout
        return plain, traced

    def test_a_script_sees_what_it_sees_under_python(self):
        script = self.script("sees.py", SEES)
        plain, traced = self.both(script, "one", "--two")
        self.assertEqual(json.loads(traced), json.loads(plain))
        seen = json.loads(traced)
        self.assertTrue(seen["main_is_this_module"])
        self.assertEqual(seen["argv"], [script, "one", "--two"])
        self.assertEqual(seen["path0"], self.dir)
        self.assertIsNone(seen["spec"])
        self.assertEqual(seen["pickles"], 49)

    def test_a_script_given_by_a_relative_path(self):
        os.mkdir(self.path("sub"))
        self.script(os.path.join("sub", "sees.py"), SEES)
        plain, traced = self.both(os.path.join("sub", "sees.py"))
        self.assertEqual(json.loads(traced), json.loads(plain))

    def test_a_module_sees_what_it_sees_under_python_m(self):
        os.mkdir(self.path("pkg"))
        self.script(os.path.join("pkg", "__init__.py"), "")
        self.script(os.path.join("pkg", "sees.py"), SEES)
        plain, traced = self.both("-m", "pkg.sees", "x")
        self.assertEqual(json.loads(traced), json.loads(plain))
        self.assertEqual(json.loads(traced)["spec"][0], "pkg.sees")

    def test_a_process_pool_finds_the_scripts_functions(self):
        script = self.script("pool.py", POOL)
        for method in ("fork", "spawn", "forkserver"):
            plain, traced = self.both(script, method)
            self.assertEqual(traced, plain, method)
            self.assertEqual(int(traced), sum(self.fib(n) for n in range(15)), method)

    @staticmethod
    def fib(n):
        return n if n < 2 else MainModule.fib(n - 1) + MainModule.fib(n - 2)


if __name__ == "__main__":
    import unittest

    unittest.main()
