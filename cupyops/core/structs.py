"""Kernel parameter structs: one definition each, its NumPy dtype, its C checks, one packer.

A :class:`Struct` lists the fields of a C struct that a kernel takes by value, in C order:
integer or float scalars, fixed-length arrays of them, and nested structs (and arrays of
them) whose values an ``encode`` function turns into bytes. From that one definition come

* ``dtype``: the NumPy structured dtype with C layout (``align=True``), which the launch code
  passes (simt takes the ``np.void``; the CUDA backend hands CuPy its bytes without the fields:
  ``cupyops.core.backend.cupy_by_value``);
* :meth:`Struct.c_asserts`: the ``static_assert`` lines on ``sizeof`` and every ``__builtin_offsetof``
  that the kernel source holds next to the C definition (tests compile both with NVRTC and
  compare the two);
* :meth:`Struct.pack`: the struct's bytes from one value per field, as one ``struct.pack``
  call (a ``np.void`` of the dtype; :meth:`Struct.pack_bytes` gives the bytes).

Packing a struct field by field through NumPy costs about 0.4 µs a store, and a struct with
per-dimension arrays takes a hundred of them. The packer instead builds one ``struct`` format
per combination of the arrays' lengths (a few per layout class), in which the missing array
elements are pad bytes (zero) or, for nested structs, the encoded fill value: a first call's
parameters (mostly padding) then cost one call. The packing function is generated with
``exec`` (as ``collections.namedtuple`` builds its methods): it unpacks the fields by name,
which the measured alternative, a plain loop over the fields (:meth:`Packer.pack_loop`, kept as
the reference and the error path), does in more than twice the time (docs/design.md,
"Generated code"; ``python -m cupyops.bench.exec_savings``).
"""
from __future__ import annotations

import struct
import typing

import numpy as np

__all__ = ["Struct", "Field", "Packer"]

_CODES = {("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q",
          ("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q",
          ("f", 4): "f", ("f", 8): "d"}


class Field(typing.NamedTuple):
    """One member: ``type`` a NumPy scalar dtype (or its string) or a nested :class:`Struct`;
    ``count`` 0 for a single value, else the array length; ``fill`` the value of the array
    elements a pack leaves out (nested structs: encoded)."""

    name: str
    type: object
    count: int = 0
    fill: object = 0


class Struct:
    """A C struct passed by value to a kernel (see the module docstring).

    ``encode``: for a struct used as a member of others, ``value -> bytes`` of one element."""

    def __init__(self, cname: str, fields, *, encode=None):
        self.cname = cname
        self.fields = tuple(Field(*f) for f in fields)
        self.encode = encode
        spec = []
        for f in self.fields:
            base = f.type.dtype if isinstance(f.type, Struct) else np.dtype(f.type)
            spec.append((f.name, base, (f.count,)) if f.count else (f.name, base))
        self.dtype = np.dtype(spec, align=True)
        self.packer = Packer(self)
        self.pack = self.packer.pack
        self.pack_bytes = self.packer.pack_bytes

    @property
    def names(self) -> tuple:
        return tuple(f.name for f in self.fields)

    def offsets(self) -> dict:
        """Byte offset of each field."""
        return {n: self.dtype.fields[n][1] for n in self.dtype.names}

    def c_asserts(self) -> str:
        """The static_assert lines the C side keeps next to ``struct <cname>``."""
        lines = [f"static_assert(sizeof({self.cname}) == {self.dtype.itemsize}, "
                 f"\"{self.cname}: size\");"]
        for name, off in self.offsets().items():
            lines.append(f"static_assert(__builtin_offsetof({self.cname}, {name}) == {off}, "
                         f"\"{self.cname}::{name}\");")
        return "\n".join(lines)


class Packer:
    """``pack(values) -> np.void`` and ``pack_bytes(values) -> bytes`` (both generated; see
    :meth:`_generate`): one value per field of
    ``layout`` (a :class:`Struct`), in order; an array field takes a sequence of at most its
    length. Integers are anything with ``__index__``; ``struct`` checks each range."""

    def __init__(self, layout: Struct):
        self.layout = layout
        self.dtype = layout.dtype
        self._pieces = self._layout_pieces()
        self._formats: dict = {}
        self.pack, self.pack_bytes = self._generate()

    def _layout_pieces(self) -> list:
        """Per field, in order: (pad bytes before it, kind, code or encoder, count, fill bytes
        per missing element); kind "scalar", "array", "nested" or "nested_array"."""
        pieces, pos = [], 0
        for f in self.layout.fields:
            off = self.dtype.fields[f.name][1]
            if isinstance(f.type, Struct):
                size = f.type.dtype.itemsize
                fill = f.type.encode(f.fill) if f.count else bytes(size)
                pieces.append((off - pos, "nested_array" if f.count else "nested",
                               f.type.encode, f.count, fill))
            else:
                base = np.dtype(f.type)
                size = base.itemsize
                code = _CODES.get((base.kind, size))
                if code is None or base.byteorder not in "=<|":
                    raise ValueError(f"{f.name}: {base} is not a little-endian integer or float")
                pieces.append((off - pos, "array" if f.count else "scalar", code, f.count,
                               None))
            pos = off + size * max(f.count, 1)
        self._tail = self.dtype.itemsize - pos
        return pieces

    def format_for(self, lengths: tuple) -> struct.Struct:
        """The format of one combination of the array fields' lengths (kept)."""
        st = self._formats.get(lengths)
        if st is not None:
            return st
        fmt, it = ["<"], iter(lengths)
        for pad, kind, code, count, fill in self._pieces:
            if pad:
                fmt.append(f"{pad}x")
            if kind == "scalar":
                fmt.append(code)
            elif kind == "nested":
                fmt.append(f"{len(fill)}s")
            else:
                k = next(it)
                if k > count:
                    raise ValueError(f"an array of {k} values for a field of {count}")
                if kind == "array":
                    fmt.append(f"{k}{code}{(count - k) * struct.calcsize(code)}x")
                else:
                    n = len(fill)
                    fmt.append(f"{n}s" * k + (f"{(count - k) * n}s" if count > k else ""))
        if self._tail:
            fmt.append(f"{self._tail}x")
        st = struct.Struct("".join(fmt))
        if st.size != self.dtype.itemsize:    # pragma: no cover - a layout bug
            raise ValueError(f"{self.layout.cname}: format {st.format} is {st.size} bytes")
        if len(self._formats) >= 256:
            self._formats.clear()
        self._formats[lengths] = st
        return st

    def pack_loop(self, values) -> bytes:
        """The struct's bytes by a plain loop over the fields: the reference the generated
        :attr:`pack_bytes` must equal, and the path that names what is wrong."""
        if len(values) != len(self._pieces):
            raise ValueError(f"{self.layout.cname}: {len(self._pieces)} field values expected, "
                             f"got {len(values)}")
        lengths, args = [], []
        for f, v, (pad, kind, code, count, fill) in zip(self.layout.fields, values,
                                                       self._pieces):
            if kind == "scalar":
                args.append(v)
            elif kind == "nested":
                args.append(code(v))
            else:
                try:
                    k = len(v)
                except TypeError:
                    raise TypeError(f"{self.layout.cname}.{f.name}: a sequence of at most "
                                    f"{count} values expected, got {v!r}") from None
                if k > count:
                    raise ValueError(f"{self.layout.cname}.{f.name}: an array of {k} values "
                                     f"for a field of {count}")
                lengths.append(k)
                if kind == "array":
                    args.extend(v)
                else:
                    args.extend(map(code, v))
                    if count > k:
                        args.append(fill * (count - k))
        return self.format_for(tuple(lengths)).pack(*args)

    def _generate(self):
        """``pack_bytes`` as one generated function: the fields unpacked by name, one
        ``struct.pack`` of a format per length combination. Anything it cannot pack goes to
        :meth:`pack_loop`, which says what is wrong."""
        names = [f"v{i}" for i in range(len(self._pieces))]
        env = {"_formats": self._formats, "_format_for": self.format_for,
               "_loop": self.pack_loop, "struct": struct, "_fb": np.frombuffer,
               "_dt": self.dtype}
        lens, args = [], []
        for i, (pad, kind, code, count, fill) in enumerate(self._pieces):
            v = names[i]
            if kind == "scalar":
                args.append(v)
            elif kind == "array":
                lens.append(f"len({v})")
                args.append(f"*{v}")
            elif kind == "nested":
                env[f"_e{i}"] = code
                args.append(f"_e{i}({v})")
            else:
                env[f"_e{i}"] = code
                # the missing elements' fill, as one bytes value (none when nothing is missing)
                env[f"_f{i}"] = ((),) + tuple((fill * m,) for m in range(1, count + 1))
                lens.append(f"len({v})")
                args.append(f"*map(_e{i}, {v}), *_f{i}[{count} - len({v})]")
        key = f"({', '.join(lens)},)" if lens else "()"
        body = (f"    try:\n"
                f"        {', '.join(names)}, = values\n"
                f"        key = {key}\n"
                f"        st = _formats.get(key) or _format_for(key)\n"
                f"        b = st.pack({', '.join(args)})\n"
                f"    except (struct.error, ValueError, TypeError, IndexError):\n"
                f"        b = _loop(values)\n")
        src = (f"def pack(values):\n{body}    return _fb(b, _dt)[0]\n"
               f"def pack_bytes(values):\n{body}    return b\n")
        exec(src, env)
        return env["pack"], env["pack_bytes"]
