"""Fakes of a kernel backend's module factory, for the module-cache tests (test_modules,
test_ensure_modules, test_precompile): a module that hands out its kernels by name, a compile
error that carries its log, and a factory registered for the length of a block."""
import contextlib

from cupyops.core import modules as _modules


class FakeCompileError(Exception):
    """A failed compile with its log, as NVRTC's errors carry one."""

    def __init__(self, log):
        super().__init__("compile failed")
        self.log = log


class OneKernelModule:
    """A built module of ``exprs``: ``get_function(expr)`` is ``("fn", expr)`` for one of them."""

    def __init__(self, exprs):
        self.exprs = exprs

    def get_function(self, expr):
        assert expr in self.exprs
        return ("fn", expr)


@contextlib.contextmanager
def registered_factory(name, factory):
    """``factory`` as backend ``name``'s module factory for the block, on an empty module
    cache; unregistered and the cache emptied after it."""
    _modules.register_module_factory(name, factory)
    _modules.clear_cache()
    try:
        yield
    finally:
        _modules.register_module_factory(name, None)
        _modules.clear_cache()
