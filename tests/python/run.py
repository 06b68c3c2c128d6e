#!/usr/bin/env python3
"""Runs tests/python with pytest when it is installed, else with a minimal stand-in that
understands what these tests use (fixtures with params, parametrize, skipif, raises), so
the suite also runs on a machine without pytest:  python tests/python/run.py [-k TEXT]"""

import importlib
import inspect
import itertools
import os
import re
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def _shim():
    m = types.ModuleType("pytest")

    class Skipped(Exception):
        pass

    class SkipIf:
        def __init__(self, cond, reason=""):
            self.cond, self.reason = cond, reason

        def __call__(self, fn):
            fn._skips = getattr(fn, "_skips", []) + [self]
            return fn

    class Mark:
        @staticmethod
        def parametrize(names, values):
            def deco(fn):
                fn._params = [(names, values)] + getattr(fn, "_params", [])
                return fn
            return deco

        skipif = SkipIf

    def fixture(fn=None, params=None):
        def deco(f):
            f._fixture_params = params
            return f
        return deco(fn) if fn is not None else deco

    class raises:
        def __init__(self, exc, match=None):
            self.exc, self.match = exc, match

        def __enter__(self):
            return self

        def __exit__(self, typ, val, tb):
            if typ is None:
                raise AssertionError(f"DID NOT RAISE {self.exc}")
            if not issubclass(typ, self.exc):
                return False
            if self.match and not re.search(self.match, str(val)):
                raise AssertionError(f"regex {self.match!r} did not match {str(val)!r}")
            return True

    def skip(reason=""):
        raise Skipped(reason)

    m.mark, m.fixture, m.raises, m.skip, m.Skipped = Mark(), fixture, raises, skip, Skipped
    return m


class _Fx:
    def __init__(self, fn, param):
        self.fn, self.param = fn, param

    def __repr__(self):
        return str(self.param) if self.param is not None else self.fn.__name__


def _cases(fn, fixtures):
    """(id, kwargs) for every combination of parametrize values and fixture params."""
    axes = []
    for names, values in getattr(fn, "_params", []):
        names = [n.strip() for n in names.split(",")]
        axes.append([dict(zip(names, v if len(names) > 1 else (v,))) for v in values])
    for name in inspect.signature(fn).parameters:
        if name in fixtures:
            fx = fixtures[name]
            params = fx._fixture_params
            if params is None:
                axes.append([{name: _Fx(fx, None)}])
            else:
                axes.append([{name: _Fx(fx, p)} for p in params])
    for combo in itertools.product(*axes):
        kwargs = {}
        for d in combo:
            kwargs.update(d)
        yield kwargs


def _label(kwargs):
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def _resolve(kwargs):
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, _Fx):
            wants_request = "request" in inspect.signature(v.fn).parameters
            out[k] = v.fn(types.SimpleNamespace(param=v.param)) if wants_request else v.fn()
        else:
            out[k] = v
    return out


def main():
    args = sys.argv[1:]
    try:
        import pytest  # noqa: F401
        return pytest.main([HERE, "-q"] + args)
    except ImportError:
        pass
    sys.modules["pytest"] = _shim()
    sys.path.insert(0, HERE)
    keyword = args[args.index("-k") + 1] if "-k" in args else ""
    conftest = importlib.import_module("conftest")
    passed = failed = skipped = 0
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        mod = importlib.import_module(fname[:-3])
        fixtures = {n: f for src in (conftest, mod) for n, f in vars(src).items() if hasattr(f, "_fixture_params")}
        mod_skips = getattr(mod, "pytestmark", None)
        mod_skips = [mod_skips] if mod_skips is not None else []
        for name, fn in sorted(vars(mod).items()):
            if not (name.startswith("test_") and callable(fn)) or keyword not in f"{fname}::{name}":
                continue
            for kwargs in _cases(fn, fixtures):
                label = f"{fname}::{name}[{_label(kwargs)}]"
                if any(s.cond for s in mod_skips + getattr(fn, "_skips", [])):
                    skipped += 1
                    continue
                try:
                    fn(**_resolve(kwargs))
                    passed += 1
                except sys.modules["pytest"].Skipped:
                    skipped += 1
                except Exception:
                    failed += 1
                    print(f"FAILED {label}")
                    traceback.print_exc()
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
