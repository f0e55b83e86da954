"""The typed msgspec schema of a Kineto trace: the args that become columns, declared once.

`ARG_FIELDS` lists every `args` key the parser reads; the event Structs are built from it, so
every other key (shapes, strides, call stacks, 128-bit NCCL ids...) is skipped cheaply while
decoding. `Event` types the hot args as ints (the fast path); `LooseEvent` types every arg as
`Any`, for files that break those types. `TimeOnly` keeps `ts`/`dur` as JSON text (exact
times); `TopLevelFields` is the top-level object with `traceEvents` left as raw JSON.
"""

from __future__ import annotations

from typing import Any

import msgspec

# (attribute, JSON key, fast-path type). Declared once: these args become columns. Only the
# hot, always-numeric keys are typed; the rare ones (a few events per step) are `Any` and
# sanitised where they are read. ROCm writes `stream` as text ("0x0"): not an integer.
ARG_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("stream", "stream", int | str),
    ("correlation", "correlation", int),
    ("external_id", "External id", int),
    ("external_id_legacy", "external id", int),  # 2020-2021 Runtime/Kernel events
    ("device", "device", int),
    ("meta_name", "name", Any),  # thread_name / process_name metadata
    ("collective_name", "Collective name", Any),
    ("in_nelems", "In msg nelems", Any),
    ("out_nelems", "Out msg nelems", Any),
    ("group_size", "Group size", Any),
    ("dtype", "dtype", Any),
    ("pg_name", "Process Group Name", Any),
    ("pg_desc", "Process Group Description", Any),
    ("seq", "Seq", Any),
    ("sequence_number", "Sequence number", Any),
    ("input_dims", "Input Dims", msgspec.Raw),
    ("input_type", "Input type", msgspec.Raw),
    ("concrete_inputs", "Concrete Inputs", msgspec.Raw),
    ("fwd_thread_id", "Fwd thread id", Any),
)
# The args every host op keeps (OPS columns), by attribute: read for every complete event.
OP_ARG_FIELDS = ("sequence_number", "fwd_thread_id", "input_dims", "input_type", "concrete_inputs")


def _arg_type(typ: Any, loose: bool) -> Any:
    if typ is msgspec.Raw:
        return msgspec.Raw  # a Raw field cannot sit in a union; absent -> the None default
    return Any if loose or typ is Any else typ | None


def _args_struct(name: str, loose: bool) -> type:
    fields = [
        (attr, _arg_type(typ, loose), msgspec.field(default=None, name=key)) for attr, key, typ in ARG_FIELDS
    ]
    return msgspec.defstruct(name, fields, gc=False, omit_defaults=True)


def _event_struct(name: str, args_type: type, ts_type: Any) -> type:
    fields = [
        ("ph", str, ""),
        ("cat", str | None, None),
        ("name", str, ""),
        ("pid", int | str | None, None),
        ("tid", int | str | None, None),
        ("ts", ts_type | None, None),
        ("dur", ts_type | None, None),
        ("args", args_type, msgspec.field(default_factory=args_type)),
    ]
    return msgspec.defstruct(name, fields, gc=False)


Args = _args_struct("Args", loose=False)
LooseArgs = _args_struct("LooseArgs", loose=True)
Event = _event_struct("Event", Args, int | float)  # int vs float tells exact-time needs
LooseEvent = _event_struct("LooseEvent", LooseArgs, Any)


class TimeOnly(msgspec.Struct, gc=False):
    """Exact path: `ts`/`dur` kept as their JSON text."""

    ph: str = ""
    ts: msgspec.Raw = None  # type: ignore[assignment]
    dur: msgspec.Raw = None  # type: ignore[assignment]


class Device(msgspec.Struct, gc=False):
    name: Any = None


class TopLevelFields(msgspec.Struct, gc=False):
    """The top-level object; `traceEvents` stays raw JSON text, decoded later in chunks."""

    traceEvents: msgspec.Raw = None  # type: ignore[assignment]
    baseTimeNanoseconds: int | None = None
    schemaVersion: Any = None
    distributedInfo: Any = None
    deviceProperties: list[Device] | None = None
    computeProperties: list[Device] | None = None
    host_name: Any = None
    hostname: Any = None
