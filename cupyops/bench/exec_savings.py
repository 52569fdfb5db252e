"""What the one piece of generated code saves: the struct packer of cupyops.core.structs.

``python -m cupyops.bench.exec_savings`` packs the parameter structs of a first call
(``ArParams`` of an argmax over axes (0, 2) of a (4, 2, 1000) array, and the ``nz_params``
template of a 3-D coordinate plan) with the generated ``pack`` and with the plain loop over the
fields (``Packer.pack_loop``, the same bytes), interleaved in one process, and prints the
microseconds of each and what the generated code saves. docs/design.md ("Generated code")
keeps ``exec`` only where this saves at least 1 µs a call.
"""
from __future__ import annotations

import argparse
import json
import timeit
from pathlib import Path

import numpy as np

from cupyops.core.backend import H100_PROPS
from cupyops.ops.argreduce.params import AR_PARAMS
from cupyops.ops.argreduce.plan import plan_argreduce_contiguous, step_digits
from cupyops.ops.nonzero.params import NZ_PARAMS
from cupyops.ops.nonzero.plan import plan_coordinates

__all__ = ["cases", "measure", "main"]


def _ar_values() -> tuple:
    p = plan_argreduce_contiguous((4, 2, 1000), 4, (0, 2), H100_PROPS)
    k_size, k_in, k_out = zip(*p.kept) if p.kept else ((), (), ())
    d_size, d_in, d_w = zip(*p.red) if p.red else ((), (), ())
    w_size, w_out, w_w = zip(*p.write) if p.write else ((), (), ())
    return (p.n_out, p.group, p.chunk, p.nchunks, p.in_base, p.out_base, p.index_base,
            p.group_full, p.write_chunk, len(p.kept), len(p.red), len(p.write), 0, False,
            False, 8, p.team, p.vec, False, False, False, p.pidx_itemsize,
            k_size, k_in, k_out, d_size, d_in, d_w, step_digits(p.step, d_size),
            w_size, w_out, w_w, step_digits(p.write_step, w_size))


def _nz_values() -> tuple:
    x = np.zeros((6, 7, 9), np.float32).transpose(1, 0, 2)
    cp = plan_coordinates(x.shape, x.strides, 4, np.int64)
    sizes, strides = zip(*cp.read_dims)
    coord_sizes, suffixes = zip(*cp.coord_dims)
    return (sizes, strides, suffixes, coord_sizes, 3, cp.unit_mask, x.size, cp.num_tiles, 0, 0,
            0, 5461, len(sizes), 3, 0, 0, 8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0)


def cases() -> dict:
    """``{name: (struct, values)}``."""
    return {"ArParams": (AR_PARAMS, _ar_values()), "nz_params": (NZ_PARAMS, _nz_values())}


def measure(number: int = 20000, repeat: int = 7) -> list:
    """``[{"struct", "generated_us", "loop_us", "saved_us"}, ...]`` (the minimum of interleaved
    repeats)."""
    rows = []
    for name, (layout, values) in cases().items():
        assert layout.pack(values).tobytes() == layout.packer.pack_loop(values)
        best = {"generated": float("inf"), "loop": float("inf")}
        generated = layout.pack
        loop = layout.packer.pack_loop
        for _ in range(repeat):
            for what, f in (("generated", generated), ("loop", loop)):
                t = timeit.timeit(lambda: f(values), number=number) / number * 1e6
                best[what] = min(best[what], t)
        rows.append({"struct": name, "generated_us": round(best["generated"], 3),
                     "loop_us": round(best["loop"], 3),
                     "saved_us": round(best["loop"] - best["generated"], 3)})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.exec_savings",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=20000, help="calls per timing")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    rows = measure(args.number)
    for r in rows:
        print(f"{r['struct']:>10}: generated {r['generated_us']:.2f} us, plain loop "
              f"{r['loop_us']:.2f} us, saved {r['saved_us']:.2f} us a struct")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
