"""`--emit slurm`: one sbatch script per scale point instead of launching.

Each node's srun task runs the point launcher (power capture + torchrun with a c10d
rendezvous on the first node); node 0 writes the manifest, as on a single machine.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tracehouse.collectors.spec import LOG_NAME, RunSpec

SCRIPT_NAME = "job.sbatch"
RDZV_PORT = 29500


def sbatch_script(spec: RunSpec, run_dir: Path, *, time_limit: str = "01:00:00") -> str:
    """The sbatch script text of one scale point."""
    per_node = spec.world_size // spec.nodes
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
            f"#SBATCH --time={time_limit}",
            f"#SBATCH --output={shlex.quote(str(run_dir / ('slurm-%j.' + LOG_NAME)))}",
            "set -euo pipefail",
            "export OMP_NUM_THREADS=1",
            'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "# one task per node: power capture around torchrun; node 0 writes manifest.json",
            f"srun {python} -m tracehouse.collectors.launch --run-dir {shlex.quote(str(run_dir))} -- {rdzv}",
            "",
        ]
    )


def emit_slurm(specs: list[RunSpec], out_dir: Path) -> list[Path]:
    """Write out_dir/<run_id>/{run_spec.json, job.sbatch} for every point; return the scripts."""
    scripts = []
    for spec in specs:
        run_dir = Path(out_dir).resolve() / spec.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        spec.write(run_dir)
        script = run_dir / SCRIPT_NAME
        script.write_text(sbatch_script(spec, run_dir))
        script.chmod(0o755)
        scripts.append(script)
    return scripts
