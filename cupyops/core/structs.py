"""Packing kernel parameter structs fast: one ``struct.pack`` instead of NumPy field stores.

A NumPy structured dtype with ``align=True`` mirrors each C parameter struct (the CuPy path
passes it as a one-element array). Filling one field by field costs about 0.4 µs a store, and
a struct with dimension arrays takes a hundred of them: 10 µs of a first call. ``Packer`` turns
the dtype into a ``struct`` format once (padding included) and packs a whole struct in one
call, then views the bytes as that dtype.
"""
from __future__ import annotations

import struct

import numpy as np

__all__ = ["Packer"]

_CODES = {("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
          ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
          ("f", 4): "f", ("f", 8): "d"}


class Packer:
    """``pack(scalars, arrays) -> np.void`` for a structured dtype whose fields are integer or
    float scalars followed by (or mixed with) fixed-length 1-D arrays of them.

    ``scalars``: the scalar fields' values in the dtype's field order; ``arrays``: one sequence
    per array field, in order, each at most the field's length (zero-padded)."""

    def __init__(self, dtype: np.dtype):
        self.dtype = np.dtype(dtype)
        fmt, pos = ["<"], 0
        self.kinds = []          # per field: None (scalar) or the array length
        pieces = []              # fmt with a tuple per array field (see _compile_scalars_first)
        for name in self.dtype.names:
            ft, off = self.dtype.fields[name][:2]
            if off > pos:
                fmt.append(f"{off - pos}x")
                pieces.append(fmt[-1])
            base, shape = (ft.subdtype if ft.subdtype else (ft, ()))
            code = _CODES.get((base.kind, base.itemsize))
            if code is None or len(shape) > 1:
                raise ValueError(f"{name}: {ft} is not an integer or float scalar or 1-D array")
            if base.byteorder not in "=<|":
                raise ValueError(f"{name}: only little-endian fields")
            if shape:
                (n,) = shape
                fmt.append(f"{n}{code}")
                pieces.append((n, code, base.itemsize))     # filled in per length
                self.kinds.append(n)
            else:
                fmt.append(code)
                pieces.append(code)
                self.kinds.append(None)
            pos = off + ft.itemsize
        if self.dtype.itemsize > pos:
            fmt.append(f"{self.dtype.itemsize - pos}x")
            pieces.append(fmt[-1])
        self._format_pieces = tuple(pieces)
        self._struct = struct.Struct("".join(fmt))
        if self._struct.size != self.dtype.itemsize:    # pragma: no cover - a layout bug
            raise ValueError(f"struct format {self._struct.format} is {self._struct.size} "
                             f"bytes, the dtype {self.dtype.itemsize}")
        self.n_scalars = sum(k is None for k in self.kinds)
        self.array_lengths = tuple(k for k in self.kinds if k is not None)
        # runs of consecutive scalars (0, count) and single arrays (1, length)
        segments = []
        for k in self.kinds:
            if k is None and segments and segments[-1][0] == 0:
                segments[-1][1] += 1
            else:
                segments.append([0, 1] if k is None else [1, k])
        self._segments = tuple((kind, n) for kind, n in segments)
        self._zeros = tuple((0,) * n for n in range(max(self.array_lengths, default=0) + 1))
        # every scalar before every array (ArParams, the nonzero structs): one loop over the
        # arrays alone
        self._scalars_first = all(k is None for k in self.kinds[:self.n_scalars])
        self._pack_bytes = self._struct.pack
        if self._scalars_first and self.array_lengths:
            self.pack = self._compile_scalars_first()

    def _compile_scalars_first(self):
        """``pack`` for a struct of scalars then arrays: one ``struct.pack`` of the scalars and
        the arrays' own values, with a format per combination of the arrays' lengths (kept, a
        few per layout class) whose pad bytes (``x``) stand for each array's missing zeros.
        The arrays of a first call's parameters are mostly padding (ArParams: 88 slots for
        about 10 values), which no longer travel as arguments. An array too long, or a count
        or value the struct refuses, goes to the loop above, which says which."""
        lengths = self.array_lengths
        pieces = self._format_pieces
        formats: dict = {}
        fb, dt, loop = np.frombuffer, self.dtype, self._pack_loop

        def struct_for(key):
            if any(k > n for k, n in zip(key, lengths)):
                raise ValueError("array lengths")
            fmt, ks = ["<"], iter(key)
            for p in pieces:
                if type(p) is str:
                    fmt.append(p)
                else:                     # k values, then the missing ones' bytes as pad
                    n, code, size = p
                    k = next(ks)
                    fmt.append(f"{k}{code}{(n - k) * size}x")
            st = struct.Struct("".join(fmt))
            assert st.size == dt.itemsize
            if len(formats) >= 256:
                formats.clear()
            formats[key] = st
            return st

        # generated with one name per array (as namedtuple builds its methods): star-unpacking
        # named tuples costs a third of chaining them
        names = [f"a{i}" for i in range(len(lengths))]
        starred = ", ".join("*" + a for a in names)
        src = (f"def pack(scalars, arrays):\n"
               f"    try:\n"
               f"        {', '.join(names)}, = arrays\n"
               f"        key = ({', '.join(f'len({a})' for a in names)},)\n"
               f"        st = formats.get(key) or struct_for(key)\n"
               f"        return fb(st.pack(*scalars, {starred}), dt)[0]\n"
               f"    except (struct.error, ValueError, TypeError):\n"
               f"        return loop(scalars, arrays)\n")
        env = {"formats": formats, "struct_for": struct_for, "fb": fb, "dt": dt, "loop": loop,
               "struct": struct}
        exec(src, env)
        return env["pack"]

    def pack(self, scalars, arrays) -> np.void:
        """Integers (anything with ``__index__``) for integer fields; struct.pack checks each
        value's range and type."""
        return self._pack_loop(scalars, arrays)

    def _pack_loop(self, scalars, arrays) -> np.void:
        if len(scalars) != self.n_scalars or len(arrays) != len(self.array_lengths):
            raise ValueError(f"{self.dtype}: {self.n_scalars} scalars and "
                             f"{len(self.array_lengths)} arrays expected")
        zeros = self._zeros
        if self._scalars_first:
            values = list(scalars)
            for a, n in zip(arrays, self.array_lengths):
                k = len(a)
                if k > n:
                    raise ValueError(f"an array of {k} values for a field of {n}")
                values += a
                values += zeros[n - k]
            return np.frombuffer(self._pack_bytes(*values), self.dtype)[0]
        values = []
        si = ai = 0
        for kind, n in self._segments:
            if kind == 0:
                values += scalars[si:si + n]
                si += n
            else:
                a = arrays[ai]
                ai += 1
                if len(a) > n:
                    raise ValueError(f"an array of {len(a)} values for a field of {n}")
                values += a
                values += zeros[n - len(a)]
        return np.frombuffer(self._struct.pack(*values), self.dtype)[0]
