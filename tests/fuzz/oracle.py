"""The fuzz oracle: parse one input with both decoders in a worker process and judge the outcome.

The contract (../shared/data/malformed/README.md): `parse_trace` returns frames or raises
TraceFormatError with one line naming the file, identically with and without the C scanner,
and never hangs. A verdict is None when the input keeps the contract, else one line saying
how it broke it. The worker is a separate process so that a hang (per-input time limit), a
crash or a sanitizer abort is a finding of its own, and the next input gets a fresh worker.

Run as a script, this file is the worker: it reads input paths on stdin and answers one JSON
line per input on stdout.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import select
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A shared object to load as the C scanner instead of the installed one (sanitizer, portable builds).
SCANNER_SO_VARIABLE = "TRACEHOUSE_FUZZ_SCANNER_SO"
# "module:function" parsing instead of parse_trace (the oracle's own tests plant faults with it).
PARSE_VARIABLE = "TRACEHOUSE_FUZZ_PARSE"
SCANNER_MODULE = "tracehouse.pipeline.parsers.kineto._kineto_scan"


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one decoder made of one input: frames (kept in the worker only) or an error."""

    kind: str  # "frames", "error" (TraceFormatError) or "bug" (anything else)
    text: str  # the error's message, or for frames the decoder
    parsed: Any = None


def outcome(parse: Callable[..., Any], path: Path, *, scanner: bool) -> Outcome:
    """Parse once; classify what came back."""
    from tracehouse.pipeline.common.errors import TraceFormatError

    try:
        parsed = parse(path, scanner=scanner)
    except TraceFormatError as exc:
        return Outcome("error", str(exc))
    except Exception as exc:  # the oracle's job: name whatever escaped, and where
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        place = f"{Path(frame.filename).name}:{frame.lineno}"
        return Outcome("bug", f"{type(exc).__name__} at {place}: {' '.join(str(exc).split())[:200]}")
    return Outcome("frames", parsed.meta.decoder, parsed)


def verdict(path: Path, fast: Outcome, slow: Outcome, *, scanner_built: bool) -> str | None:
    """None when both outcomes keep the contract, else the finding in one line."""
    for name, one in (("scanner", fast), ("msgspec", slow)):
        if one.kind == "bug":
            return f"{name} path: {one.text}"
        if one.kind == "error" and ("\n" in one.text or not one.text.startswith(f"{path}: ")):
            return f"{name} path: error is not one line naming the file: {one.text[:200]!r}"
    if slow.kind == "frames" and slow.text != "msgspec":
        return f"scanner=False read by {slow.text}"
    if fast.kind != slow.kind:
        scanner, msgspec = f"{fast.kind} ({fast.text[:120]})", f"{slow.kind} ({slow.text[:120]})"
        return f"decoders disagree: scanner {scanner}, msgspec {msgspec}"
    if fast.kind == "error":
        return (
            None if fast.text == slow.text else f"errors differ: {fast.text[:150]!r} vs {slow.text[:150]!r}"
        )
    if (fast.parsed.extra.get("decoder") == "scan") != (fast.text == "scanner"):
        return f"meta.decoder {fast.text!r} but extra decoder {fast.parsed.extra.get('decoder')!r}"
    if not scanner_built and fast.text == "scanner":
        return "read by the scanner, which is not built"
    return _frames_differ(fast.parsed, slow.parsed)


def _frames_differ(fast: Any, slow: Any) -> str | None:
    from tracehouse.pipeline.warehouse.partitions import TRACE_TABLES  # every frame that becomes a table

    for name in TRACE_TABLES:
        a, b = getattr(fast, name), getattr(slow, name)
        if a.schema != b.schema or not a.equals(b):
            return f"frames differ: {name}"
    if fast.meta != dataclasses.replace(slow.meta, decoder=fast.meta.decoder):
        return "meta differs"
    if {**fast.extra, "decoder": ""} != {**slow.extra, "decoder": ""}:
        return "extra differs"
    return None


def _load_parse() -> Callable[..., Any]:
    """The parse function under test (loading a replacement scanner first, when one is named)."""
    so = os.environ.get(SCANNER_SO_VARIABLE)
    if so:
        spec = importlib.util.spec_from_file_location(SCANNER_MODULE, so)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[SCANNER_MODULE] = module
    name = os.environ.get(PARSE_VARIABLE, "tracehouse.pipeline.parsers.kineto.parse:parse_trace")
    module_name, _, function = name.partition(":")
    parse = getattr(importlib.import_module(module_name), function)
    from tracehouse.pipeline.parsers.kineto import fastscan

    if so and fastscan._kineto_scan is not sys.modules[SCANNER_MODULE]:
        raise SystemExit(f"the scanner at {so} was not the one loaded")
    return parse


def worker_main() -> None:
    """Answer one JSON verdict line per input path read from stdin."""
    parse = _load_parse()
    from tracehouse.pipeline.parsers.kineto.fastscan import available

    print(json.dumps({"ready": True, "scanner": available()}), flush=True)
    for line in sys.stdin:
        path = Path(line.rstrip("\n"))
        fast = outcome(parse, path, scanner=True)
        slow = outcome(parse, path, scanner=False)
        found = verdict(path, fast, slow, scanner_built=available())
        print(json.dumps({"finding": found, "kinds": [fast.kind, slow.kind]}), flush=True)


class Worker:
    """A worker process; `judge` restarts it after a hang or a crash."""

    def __init__(self, log: Path, env: dict[str, str] | None = None, script: Path | None = None) -> None:
        self.log_path, self.env = log, {**os.environ, **(env or {})}
        self.script = script or Path(__file__).resolve()  # the worker program (format_oracle.py too)
        self.proc: subprocess.Popen[str] | None = None
        self.scanner = self.ended = False

    def _start(self) -> None:
        self.log = self.log_path.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env=self.env,
        )
        ready = self._answer(120.0)
        if ready is None or not ready.get("ready"):
            raise RuntimeError(f"the fuzz worker did not start (see {self.log_path})")
        self.scanner = ready["scanner"]

    def _answer(self, seconds: float) -> dict[str, Any] | None:
        """The worker's next line; None when it gave none in time or closed its output (died)."""
        assert self.proc is not None and self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], seconds)
        line = self.proc.stdout.readline() if readable else ""
        self.ended = bool(readable) and not line
        return json.loads(line) if line else None

    def judge(self, path: Path, seconds: float) -> tuple[str | None, list[str]]:
        """(finding or None, the two outcome kinds) for one input, within `seconds`."""
        if self.proc is None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{path}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        answer = self._answer(seconds)
        if answer is not None:
            return answer["finding"], answer["kinds"]
        hung = not self.ended
        code = self.close()
        if hung:
            return f"no answer within {seconds:g} s (hang)", ["hang", "hang"]
        return f"the worker died (exit {code}; see {self.log_path})", ["crash", "crash"]

    def close(self) -> int | None:
        """Stop the worker (killed if still running); its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait()
        self.log.close()
        self.proc = None
        return code


if __name__ == "__main__":
    worker_main()
