"""Every ```python snippet of docs/api.md runs as written, imports included (issue 37), and a
result it states in a comment (``argmin([1, 2, 3, 2, 1])   # 0``: a comment that starts with a
number, a list or a tuple) is the result it gives.

A snippet that needs what this machine may lack says so in the line above it, ``<!-- snippet:
needs a GPU, dask_cuda -->``: "a GPU" (cupyops.core.devices.cuda_status), "simt"
(simt_status) or a module name; it is skipped, with the reason, where that is missing."""
import ast
import importlib.util
import pathlib
import re

import numpy as np
import pytest

from cupyops.core import devices

API = pathlib.Path(__file__).resolve().parents[1] / "docs" / "api.md"
_BLOCK = re.compile(r"(?:<!-- snippet: needs ([^>]*?) -->\n)?```python\n(.*?)```", re.S)


def snippets():
    """[(line number, needs, source)] of every ```python block of docs/api.md."""
    text = API.read_text()
    out = []
    for m in _BLOCK.finditer(text):
        needs = [w.strip() for w in (m.group(1) or "").split(",") if w.strip()]
        out.append((text.count("\n", 0, m.start(2)) + 1, needs, m.group(2)))
    return out


SNIPPETS = snippets()


def test_every_python_block_is_found():
    assert len(SNIPPETS) == API.read_text().count("```python") >= 12


def _missing(need):
    """Why ``need`` is not met here, or None."""
    if need == "a GPU":
        ok, why = devices.cuda_status()
    elif need == "simt":
        ok, why = devices.simt_status()
    else:
        ok, why = importlib.util.find_spec(need) is not None, f"{need} is not installed"
    return None if ok else why


def _stated(comment):
    """The result a comment states: the longest Python literal it starts with (a number, a
    list or a tuple, followed by the end, a space or punctuation), or None."""
    text = comment.strip()
    if not text or text[0] not in "-0123456789[(":
        return None
    for end in range(len(text), 0, -1):
        head, rest = text[:end].rstrip(), text[end:]
        if head.endswith(",") or (rest and rest[0] not in " \t:;,"):
            continue
        try:
            return (ast.literal_eval(head),)
        except (ValueError, SyntaxError):
            continue
    return None


def _same(got, want):
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(
            _same(g, w) for g, w in zip(got, want))
    got = got.get() if hasattr(got, "get") and not isinstance(got, np.ndarray) else got
    return np.array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("line,needs,source", SNIPPETS, ids=[f"line{s[0]}" for s in SNIPPETS])
def test_snippet_runs_as_written(line, needs, source):
    for need in needs:
        why = _missing(need)
        if why:
            pytest.skip(f"docs/api.md line {line} needs {need}: {why}")
    lines = source.splitlines()
    namespace = {"__name__": "api_snippet"}
    import cupyops
    try:
        for stmt in ast.parse(source).body:
            code = lines[stmt.lineno - 1]
            want = _stated(code.split("#", 1)[1]) if "#" in code and \
                stmt.end_lineno == stmt.lineno else None
            if isinstance(stmt, ast.Expr) and want is not None:
                got = eval(compile(ast.Expression(stmt.value), f"api.md:{line}", "eval"),
                           namespace)
                assert _same(got, want[0]), (f"docs/api.md line {line + stmt.lineno - 1}: "
                                             f"{code.strip()} gives {got!r}")
            else:
                exec(compile(ast.Module([stmt], []), f"api.md:{line}", "exec"), namespace)
    finally:
        cupyops.set_num_threads(None)


def test_a_stated_result_is_checked():
    assert _stated(" 4   (seed example)") == (4,)
    assert _stated(" [0, 0, 7]: in the (2, 4) sub-array") == ([0, 0, 7],)
    assert _stated(" 4294967295, instantly: a broadcast") == (4294967295,)
    assert _stated(" cupyops' (so are argmin)") is None
    assert _stated(" (array([0, 1, 1]), array([5, 0, 2]))") is None
    assert not _same(np.array([1, 0]), [0, 1]) and _same((np.array([[0]]), np.array(1)), ([[0]], 1))
