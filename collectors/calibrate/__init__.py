"""`tracehouse calibrate`: a real collective sweep under torchrun, written in the nccl-tests layout.

spec.py (what to measure, the nccl-tests op table), results.py (what was measured),
nccl_layout.py (the nccl-tests 2.17 text), collectives.py and worker.py (the torch side, run
in every rank), launch.py (torchrun, then the files). Only collectives.py and worker.py import torch.
"""
