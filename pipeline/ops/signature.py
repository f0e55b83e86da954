"""One op call's inputs as a Kineto trace records them: shapes, element types, concrete values."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

# Bytes per element of the tensor types Kineto names in `Input type` (c10's scalar type names).
DTYPE_BYTES: dict[str, int] = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}
TENSOR_LIST = "TensorList"
# Element types -> the dtype names of the peak table (pipeline/common/hardware.py); a float op
# is held to the fp32 peak (whether a GPU ran it as tf32 is not in the trace).
PEAK_DTYPES: dict[str, str] = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32"}

Shape = tuple[int, ...]


class SignatureError(ValueError):
    """An op's shape text does not fit the formula its name selects."""


@dataclass(frozen=True, kw_only=True)
class Signature:
    """The inputs of one op call: per argument its dims, type text and concrete value text."""

    name: str
    dims: tuple[object, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]

    @classmethod
    def parse(cls, name: str, dims: str | None, types: str | None, concrete: str | None) -> Signature:
        """Read the three JSON texts of a cpu_op's args (absent ones read as empty)."""
        dim_list = json.loads(dims) if dims else []
        type_list = json.loads(types) if types else []
        value_list = json.loads(concrete) if concrete else []
        width = len(dim_list)
        type_list = [*type_list, *[""] * (width - len(type_list))]
        value_list = [*value_list, *[""] * (width - len(value_list))]
        return cls(name=name, dims=tuple(dim_list), types=tuple(type_list), concrete=tuple(value_list))

    def is_tensor(self, i: int) -> bool:
        """Whether argument i is one tensor (a 0-d tensor has dims [] but an element type)."""
        return i < len(self.types) and self.types[i] in DTYPE_BYTES

    def shape(self, i: int) -> Shape:
        """The shape of tensor argument i."""
        if not self.is_tensor(i):
            raise SignatureError(f"{self.name}: argument {i} is not a tensor ({self.type_text(i)!r})")
        return tuple(self._dim(d) for d in self.dims[i])

    def _dim(self, d: object) -> int:
        """One dimension as an integer; a damaged one (infinite, NaN, not a number) is a SignatureError."""
        try:
            return int(d)  # type: ignore[call-overload]
        except (OverflowError, ValueError, TypeError) as exc:
            raise SignatureError(f"{self.name}: dimension {d!r} is not an integer") from exc

    def shapes(self) -> list[Shape]:
        """The shapes of every single-tensor argument, in order."""
        return [self.shape(i) for i in range(len(self.dims)) if self.is_tensor(i)]

    def list_shapes(self, i: int) -> list[Shape]:
        """The shapes of the tensors of TensorList argument i."""
        if self.type_text(i) != TENSOR_LIST:
            raise SignatureError(f"{self.name}: argument {i} is not a TensorList ({self.type_text(i)!r})")
        return [tuple(self._dim(d) for d in s) for s in self.dims[i]]

    def itemsize(self, i: int) -> int:
        """Bytes per element of tensor argument i."""
        return DTYPE_BYTES[self.types[i]]

    def tensor_bytes(self, i: int) -> int:
        """Bytes of tensor argument i."""
        return numel(self.shape(i)) * self.itemsize(i)

    def first_itemsize(self) -> int | None:
        """Bytes per element of the first single-tensor argument: the op's compute dtype, if known."""
        for i in range(len(self.types)):
            if self.is_tensor(i):
                return self.itemsize(i)
        return None

    def compute_dtype(self) -> str | None:
        """The peak table's dtype of the first single-tensor argument (bf16, fp16, fp32), or None."""
        first = next((t for i, t in enumerate(self.types) if self.is_tensor(i)), None)
        return PEAK_DTYPES.get(first) if first else None

    def type_text(self, i: int) -> str:
        """The `Input type` text of argument i ('' past the end)."""
        return self.types[i] if i < len(self.types) else ""

    def ints(self, i: int) -> list[int]:
        """Concrete int list argument i ('[1, 1]'), or [] when the trace did not record it."""
        text = self.concrete[i] if i < len(self.concrete) else ""
        return [int(v) for v in json.loads(text)] if text else []

    def flag(self, i: int) -> bool | None:
        """Concrete bool argument i, or None when not recorded."""
        text = self.concrete[i] if i < len(self.concrete) else ""
        return {"True": True, "False": False}.get(text)

    def flags(self, i: int) -> list[bool]:
        """Concrete bool list argument i ('[True, False]'), or [] when not recorded."""
        text = self.concrete[i] if i < len(self.concrete) else ""
        return [v.strip() == "True" for v in text.strip("[]").split(",")] if text else []


def numel(shape: Shape) -> int:
    """Elements of a tensor of this shape (1 for a 0-d tensor)."""
    return math.prod(shape)


def broadcast(*shapes: Shape) -> Shape:
    """The broadcast shape of several tensor shapes (NumPy rules)."""
    width = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (width - len(s)) + tuple(s) for s in shapes]
    out = []
    for sizes in zip(*padded, strict=True):
        others = {d for d in sizes if d != 1}
        if len(others) > 1:
            raise SignatureError(f"shapes {shapes} do not broadcast")
        out.append(others.pop() if others else 1)
    return tuple(out)


@dataclass(frozen=True)
class Cost:
    """What one call of an op does: FLOPs, and bytes moved as a lower bound (None when unknown)."""

    flops: int
    bytes: int | None


def io_bytes(sig: Signature, out_shapes: list[Shape], itemsize: int | None = None) -> int:
    """Every single-tensor input read once plus the outputs written once, in the inputs' dtype."""
    size = itemsize or sig.first_itemsize() or 0
    read = sum(sig.tensor_bytes(i) for i in range(len(sig.dims)) if sig.is_tensor(i))
    return read + sum(numel(s) for s in out_shapes) * size
