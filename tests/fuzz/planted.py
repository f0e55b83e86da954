"""A parse function with planted faults, for the oracle's own tests (TRACEHOUSE_FUZZ_PARSE=planted:parse).

The input file's name says what goes wrong; any other name parses as parse_trace does.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto.parse import parse_trace


def parse(path: Path, *, scanner: bool) -> Any:
    """parse_trace, broken as the file name says."""
    fault = Path(path).name.split(".")[0]
    if fault == "keyerror" and scanner:
        raise KeyError("planted")
    if fault == "hang" and not scanner:
        time.sleep(3600)
    if fault == "crash":
        os.abort()
    if fault == "unnamed":
        raise TraceFormatError("another.json", "an error that names another file")
    if fault == "differ":
        parsed = parse_trace(path, scanner=scanner)
        return dataclasses.replace(parsed, threads=parsed.threads.head(0)) if scanner else parsed
    if fault == "oneside" and scanner:
        raise TraceFormatError(path, "only the scanner refuses it")
    return parse_trace(path, scanner=scanner)
