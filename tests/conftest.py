import os

import pytest
from hypothesis import HealthCheck, settings

# CI: fast and deterministic. "thorough": run before closing an issue (--hypothesis-profile=thorough).
settings.register_profile("ci", deadline=None, derandomize=True, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("CUPYOPS_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run tests marked slow (big sweeps, wheel build)")


def pytest_configure(config):
    if config.getoption("--run-slow"):
        # the NVRTC compile checks then cover every supported architecture, not only the required
        # (an exported "required", the default's name, would keep CI's sample silently)
        from _nvrtc_sample import sampled
        if sampled():
            os.environ["CUPYOPS_NVRTC_ARCHS"] = "all"
    config.addinivalue_line("markers", "slow: big sweeps; run with --run-slow")
    config.addinivalue_line("markers", "gpu: needs a real CUDA GPU through CuPy")


#: the files of a cold run's longest setups and calls (``--durations``, a fresh clone on 2
#: cores, 2026-11-28: the NVRTC compile fixture 308 s, the simt selftest 115 s, CuPy's compile
#: path 107 s, ...), in that order: the README's command (``--dist loadfile
#: --no-loadscope-reorder``) hands files to the workers in collection order, so these start
#: first and the short files fill the other core around them
LONGEST_FIRST = ("test_nvrtc_compile.py", "test_selftest.py", "test_cupy_compile.py",
                 "test_cupy_path.py", "test_memory_terms.py", "test_nvrtc_floor.py",
                 "test_fork_safety.py", "test_packaging.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # (stable: the rest
    #                                                                     keep their order)
    if not config.getoption("--run-slow"):
        skip = pytest.mark.skip(reason="slow: run with --run-slow")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)
    from _devices import GPU, gpu_skip_reason
    if not GPU:
        skip_gpu = pytest.mark.skip(reason=gpu_skip_reason())
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


@pytest.fixture
def selftest_family():
    """The selftest kernel family registered for the test, unregistered (if it was not before)
    and its modules dropped after (tests of the module registry, the backends, ensure_modules)."""
    from cupyops.core import modules as m
    old = m.families().get("selftest")
    m.register_family(m.SELFTEST_FAMILY)
    yield m.SELFTEST_FAMILY
    if old is None:
        m._families.pop("selftest", None)
    m.clear_cache("selftest")
