"""ONNX's own backend node cases for ArgMax, ArgMin, Hardmax and NonZero, from the onnx wheel."""
import warnings

import numpy as np
import pytest

from _devices import KERNEL_DEVICES, NONZERO_KERNEL_DEVICES, ops

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

OPS = ("ArgMax", "ArgMin", "Hardmax", "NonZero")


def _cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases
        cases = collect_testcases()
    out = []
    for case in cases:
        graph = case.model.graph
        if len(graph.node) != 1 or graph.node[0].op_type not in OPS:
            continue
        out.append(case)
    return out


CASES = _cases()


def test_cases_were_found():
    ops = {c.model.graph.node[0].op_type for c in CASES}
    assert ops == set(OPS), ops
    assert len(CASES) >= 30


def _run(node, inputs, device):
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    (x,) = inputs
    op = node.op_type
    on = ops(device)
    if op in ("ArgMax", "ArgMin"):
        f = on.argmax if op == "ArgMax" else on.argmin
        return [f(x, axis=attrs.get("axis", 0), keepdims=bool(attrs.get("keepdims", 1)),
                  tie="last" if attrs.get("select_last_index", 0) else "first")]
    if op == "Hardmax":
        return [on.hardmax(x, axis=attrs.get("axis", -1))]
    if op == "NonZero":
        coords = on.argwhere(x)
        return [np.ascontiguousarray(coords.T)]   # ONNX: (ndim, count) int64
    raise AssertionError(op)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_onnx_node_case(case):
    node = case.model.graph.node[0]
    devices = ["cpu"] + (NONZERO_KERNEL_DEVICES if node.op_type == "NonZero" else KERNEL_DEVICES)
    assert case.data_sets, "case has no data"
    for inputs, expected in case.data_sets:
        for device in devices:
            got = _run(node, list(inputs), device)
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.dtype == e.dtype, (device, g.dtype, e.dtype)
                np.testing.assert_array_equal(g, e, err_msg=f"{case.name} on {device}")
