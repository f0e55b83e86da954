"""`--emit slurm`: one sbatch script per scale point instead of launching.

Each node's srun task runs the point launcher (power capture + torchrun with a c10d
rendezvous on the first node); node 0 writes the manifest, as on a single machine.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from tracehouse.collectors.spec import LOG_NAME, RunSpec

SCRIPT_NAME = "job.sbatch"
RDZV_PORT = 29500
# One srun task per node runs every rank of the node: it needs their CPUs, not SLURM's default 1.
CPUS_PER_RANK = 8


@dataclass(frozen=True, kw_only=True)
class SlurmConfig:
    """The `[slurm]` table of a sweep file: what each job asks SLURM for besides GPUs."""

    # CPUs of the one task per node (SLURM's default is 1 for all its ranks); None: 8 per rank.
    cpus_per_task: int | None = None
    # The whole node: no other job's traffic or power in the measurement.
    exclusive: bool = True

    def __post_init__(self) -> None:
        if self.cpus_per_task is not None and (
            not isinstance(self.cpus_per_task, int)
            or isinstance(self.cpus_per_task, bool)
            or self.cpus_per_task < 1
        ):
            raise ValueError(f"cpus_per_task must be a positive integer, got {self.cpus_per_task!r}")
        if not isinstance(self.exclusive, bool):
            raise ValueError(f"exclusive must be true or false, got {self.exclusive!r}")

    def cpus(self, ranks_per_node: int) -> int:
        """--cpus-per-task for a node running ranks_per_node ranks."""
        return self.cpus_per_task or CPUS_PER_RANK * ranks_per_node


def sbatch_script(
    spec: RunSpec, run_dir: Path, *, time_limit: str = "01:00:00", config: SlurmConfig | None = None
) -> str:
    """The sbatch script text of one scale point."""
    config = config or SlurmConfig()
    per_node = spec.world_size // spec.nodes
    cpus = config.cpus(per_node)
    python = shlex.quote(sys.executable)
    rdzv = (
        f"--nnodes {spec.nodes} --nproc_per_node {per_node} --rdzv-backend c10d "
        f'--rdzv-endpoint "$HEAD:{RDZV_PORT}" --rdzv-id "$SLURM_JOB_ID"'
    )
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name=tracehouse-{spec.study}-{spec.run_id}",
            f"#SBATCH --nodes={spec.nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gpus-per-node={per_node}",
            f"#SBATCH --cpus-per-task={cpus}",
            *(["#SBATCH --exclusive"] if config.exclusive else []),
            f"#SBATCH --time={time_limit}",
            f"#SBATCH --output={shlex.quote(str(run_dir / ('slurm-%j.' + LOG_NAME)))}",
            "set -euo pipefail",
            "export OMP_NUM_THREADS=1",
            'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "# one task per node: power capture around torchrun; node 0 writes manifest.json",
            # srun does not inherit --cpus-per-task from sbatch (SLURM 22.05 and later): state it again.
            f"srun --cpus-per-task={cpus} {python} -m tracehouse.collectors.launch "
            f"--run-dir {shlex.quote(str(run_dir))} -- {rdzv}",
            "",
        ]
    )


def emit_slurm(specs: list[RunSpec], out_dir: Path, config: SlurmConfig | None = None) -> list[Path]:
    """Write out_dir/<run_id>/{run_spec.json, job.sbatch} for every point; return the scripts."""
    scripts = []
    for spec in specs:
        run_dir = Path(out_dir).resolve() / spec.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        spec.write(run_dir)
        script = run_dir / SCRIPT_NAME
        script.write_text(sbatch_script(spec, run_dir, config=config))
        script.chmod(0o755)
        scripts.append(script)
    return scripts
