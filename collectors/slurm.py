"""`--emit slurm`: one sbatch script per scale point instead of launching.

Each node's srun task runs the point launcher (power capture + torchrun with a c10d
rendezvous on the first node); node 0 writes the manifest, as on a single machine. The job's
time limit is the launcher's timeout plus a margin, so a hung torchrun is stopped by the
launcher, which still writes the failed manifest, before SLURM kills the job.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from tracehouse.collectors.spec import DEFAULT_TIMEOUT_S, LOG_NAME, RunSpec

SCRIPT_NAME = "job.sbatch"
RDZV_PORT = 29500
# One srun task per node runs every rank of the node: it needs their CPUs, not SLURM's default 1.
CPUS_PER_RANK = 8
# Seconds between the launcher's timeout and SLURM's time limit (stopping torchrun, the power
# sampler, writing the manifest; a slow start of the job).
DEFAULT_TIME_MARGIN_S = 600


@dataclass(frozen=True, kw_only=True)
class SlurmConfig:
    """The `[slurm]` table of a sweep file: what each job asks SLURM for besides GPUs."""

    # CPUs of the one task per node (SLURM's default is 1 for all its ranks); None: 8 per rank.
    cpus_per_task: int | None = None
    # The whole node: no other job's traffic or power in the measurement.
    exclusive: bool = True
    # The job's time limit is the launcher's timeout plus this: when torchrun hangs, the launcher
    # stops it and writes the failed manifest before SLURM kills the job.
    time_margin_s: int = DEFAULT_TIME_MARGIN_S

    def __post_init__(self) -> None:
        if self.cpus_per_task is not None and (
            not isinstance(self.cpus_per_task, int)
            or isinstance(self.cpus_per_task, bool)
            or self.cpus_per_task < 1
        ):
            raise ValueError(f"cpus_per_task must be a positive integer, got {self.cpus_per_task!r}")
        if not isinstance(self.exclusive, bool):
            raise ValueError(f"exclusive must be true or false, got {self.exclusive!r}")
        margin = self.time_margin_s
        if not isinstance(margin, int) or isinstance(margin, bool) or margin < 1:
            raise ValueError(f"time_margin_s must be a positive integer, got {margin!r}")

    def cpus(self, ranks_per_node: int) -> int:
        """--cpus-per-task for a node running ranks_per_node ranks."""
        return self.cpus_per_task or CPUS_PER_RANK * ranks_per_node


def time_limit(seconds: float) -> str:
    """SLURM's --time for a number of seconds, rounded up to the minute: days-hours:minutes:seconds."""
    minutes = max(1, -(-int(seconds) // 60))
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


@dataclass(frozen=True, kw_only=True)
class NodeJob:
    """One multi-node job: one srun task per node runs `launcher`, then torchrun's rendezvous flags."""

    name: str
    nodes: int
    per_node: int  # ranks (GPUs) of each node
    log: Path  # SLURM's own output (%j: the job id)
    launcher: list[str]  # the per-node launch command before `-- <rendezvous flags>`
    timeout_s: float  # the launcher's timeout (the job's limit adds the config's margin)


def job_script(job: NodeJob, config: SlurmConfig | None = None) -> str:
    """The sbatch script text of one multi-node job."""
    config = config or SlurmConfig()
    cpus = config.cpus(job.per_node)
    rdzv = (
        f"--nnodes {job.nodes} --nproc_per_node {job.per_node} --rdzv-backend c10d "
        f'--rdzv-endpoint "$HEAD:{RDZV_PORT}" --rdzv-id "$SLURM_JOB_ID"'
    )
    launcher = " ".join(shlex.quote(part) for part in job.launcher)
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name={job.name}",
            f"#SBATCH --nodes={job.nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gpus-per-node={job.per_node}",
            f"#SBATCH --cpus-per-task={cpus}",
            *(["#SBATCH --exclusive"] if config.exclusive else []),
            f"#SBATCH --time={time_limit(job.timeout_s + config.time_margin_s)}",
            f"#SBATCH --output={shlex.quote(str(job.log))}",
            "set -euo pipefail",
            "export OMP_NUM_THREADS=1",
            'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "# one task per node: its launcher runs torchrun; node 0 (SLURM_NODEID) writes the results",
            # srun does not inherit --cpus-per-task from sbatch (SLURM 22.05 and later): state it again.
            f"srun --cpus-per-task={cpus} {launcher} -- {rdzv}",
            "",
        ]
    )


def sbatch_script(
    spec: RunSpec, run_dir: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S, config: SlurmConfig | None = None
) -> str:
    """The sbatch script text of one scale point (power capture around torchrun on each node)."""
    launcher = [sys.executable, "-m", "tracehouse.collectors.launch", "--run-dir", str(run_dir)]
    job = NodeJob(
        name=f"tracehouse-{spec.study}-{spec.run_id}",
        nodes=spec.nodes,
        per_node=spec.world_size // spec.nodes,
        log=run_dir / ("slurm-%j." + LOG_NAME),
        launcher=[*launcher, "--timeout", f"{timeout_s:g}"],
        timeout_s=timeout_s,
    )
    return job_script(job, config)


def emit_slurm(
    specs: list[RunSpec],
    out_dir: Path,
    config: SlurmConfig | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[Path]:
    """Write out_dir/<run_id>/{run_spec.json, job.sbatch} for every point; return the scripts."""
    scripts = []
    for spec in specs:
        run_dir = Path(out_dir).resolve() / spec.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        spec.write(run_dir)
        script = run_dir / SCRIPT_NAME
        script.write_text(sbatch_script(spec, run_dir, timeout_s=timeout_s, config=config))
        script.chmod(0o755)
        scripts.append(script)
    return scripts
