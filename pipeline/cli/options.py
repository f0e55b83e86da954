"""The CLI's shared vocabulary of options, declared once: the warehouse, outputs, JSON, what to ingest.

Every command names the warehouse with `--warehouse DIR`, defaulting alike to
$TRACEHOUSE_WAREHOUSE, else `./warehouse`; a command that writes a file or folder takes
`-o/--out`; one with a machine-readable summary takes `--json`. Older spellings (`--output`)
still work, with a note saying what to write instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tracehouse.collectors.model_sizes import MODELS, flops_per_token, fsdp_unit_params, param_count
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.common.manifest import check_facts
from tracehouse.pipeline.discovery.ranks import parse_rank_options

WAREHOUSE_VARIABLE = "TRACEHOUSE_WAREHOUSE"
DEFAULT_WAREHOUSE = "warehouse"


def default_warehouse() -> str:
    """The warehouse a command uses without --warehouse: $TRACEHOUSE_WAREHOUSE, else ./warehouse."""
    return os.environ.get(WAREHOUSE_VARIABLE) or DEFAULT_WAREHOUSE


def add_warehouse_option(parser: argparse.ArgumentParser, *, creates: bool = False) -> None:
    """`--warehouse DIR`, with the default every command shares."""
    what = "warehouse directory (created if absent)" if creates else "warehouse directory"
    parser.add_argument(
        "--warehouse",
        type=Path,
        default=Path(default_warehouse()),
        metavar="DIR",
        help=f"{what}; default ${WAREHOUSE_VARIABLE}, else ./warehouse",
    )


def add_out_option(
    parser: argparse.ArgumentParser, *, metavar: str, help: str, required: bool = True
) -> None:
    """`-o/--out PATH` (the older `--output` still works, with a note)."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("-o", "--out", type=Path, metavar=metavar, help=help)
    group.add_argument(
        "--output", dest="out", type=Path, action=Deprecated, instead="-o/--out", help=argparse.SUPPRESS
    )


def add_json_option(parser: argparse.ArgumentParser, what: str = "the summary") -> None:
    """`--json`: a machine-readable summary on stdout (the human lines go to stderr)."""
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout")


class Deprecated(argparse.Action):
    """An older spelling of an option: stores like the new one and says, on stderr, what to write instead."""

    def __init__(self, option_strings: list[str], dest: str, *, instead: str, **kwargs: Any) -> None:
        self.instead = instead
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog}: note: {option_string} is deprecated; use {self.instead}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_ingest_options(parser: argparse.ArgumentParser) -> None:
    """The paths and options that choose what to ingest and how (shared by `ingest` and `analyze`)."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="trace files or directories, local or in object storage (s3://bucket/prefix/, gs://, az://)",
    )
    parser.add_argument("--study", help="study of traces without a manifest.json (default: 'default')")
    parser.add_argument(
        "--run",
        help="one run id for every trace found without a manifest.json (default: each folder splits "
        "into runs by the traces' distributedInfo, as the README says)",
    )
    parser.add_argument(
        "--rank",
        action="append",
        default=[],
        metavar="FILE=N",
        help="rank of a trace that has no distributedInfo.rank and no manifest entry (repeatable)",
    )
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", help="an existing Dask scheduler, e.g. tcp://host:8786"
    )
    add_json_option(parser)
    facts = parser.add_argument_group(
        "run facts", "what a manifest.json would state, for every run found without one"
    )
    for flag, (kind, help_text) in RUN_FACT_OPTIONS.items():
        facts.add_argument(flag, type=kind, default=None, help=help_text)


# Manifest fields a user may state on the command line (flag -> (type, help)); see docs/warehouse.md.
RUN_FACT_OPTIONS: dict[str, tuple[type, str]] = {
    "--tokens-per-step": (int, "tokens one training step processes, all ranks together"),
    "--global-batch": (int, "sequences per step, all ranks together (with --seq-len: tokens per step)"),
    "--seq-len": (int, "tokens per sequence"),
    "--strategy": (str, "parallel strategy, e.g. ddp, fsdp, tp, pp, fsdp_tp"),
    "--model": (
        str,
        "model name; a reference Llama-2 size (tiny, 7b, ...) also gives its parameters, its FSDP "
        "units and, with --seq-len, FLOPs per token",
    ),
    "--dtype": (str, "compute dtype (bf16, fp16, tf32, fp32): with the trace's device name, the peak FLOP/s"),
    "--flops-per-token": (float, "training FLOPs per token (default for a reference --model: 6N + 12Lds)"),
}


def ingest_choices(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `ingest()` that the shared options set."""
    try:
        ranks = parse_rank_options(args.rank)
    except ValueError as exc:
        raise TracehouseError(str(exc)) from exc
    return {
        "study": args.study,
        "run": args.run,
        "ranks": ranks,
        "scheduler": args.scheduler,
        "facts": run_facts(args),
    }


def run_facts(args: argparse.Namespace) -> dict[str, Any]:
    """The run facts stated by options, with a reference model's parameters and FLOPs per token."""
    names = (flag.removeprefix("--").replace("-", "_") for flag in RUN_FACT_OPTIONS)
    facts = {name: value for name in names if (value := getattr(args, name)) is not None}
    if facts.get("model") in MODELS:
        config = MODELS[facts["model"]]
        facts.setdefault("model_config", config.as_dict())
        facts.setdefault("n_params", param_count(config))
        facts.setdefault("fsdp_units", fsdp_unit_params(config))
        if "seq_len" in facts:
            facts.setdefault("flops_per_token", flops_per_token(config, facts["seq_len"]))
    try:
        check_facts(facts)
    except ValueError as exc:
        name = str(exc).split(" ", 1)[0]
        raise TracehouseError(f"--{name.replace('_', '-')}: {str(exc).split(' ', 1)[1]}") from exc
    return facts
