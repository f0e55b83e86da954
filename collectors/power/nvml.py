"""Sample every GPU's power and energy counter through NVML (nvidia-ml-py) on a background thread."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import IO, Any

from tracehouse.collectors.power.config import SamplerConfig
from tracehouse.collectors.power.errors import PowerSourceError, from_nvml_error
from tracehouse.pipeline.common.gpu_identity import VISIBLE_FACT, PhysicalGpu, visible_gpus
from tracehouse.pipeline.common.power_log import (
    NVML_CLOCK,
    NVML_COLUMNS,
    NVML_IDENTITY_COLUMNS,
    NVML_IDENTITY_HEADER,
    format_log_header,
)

log = logging.getLogger(__name__)


def format_row(ts_unix_ns: int, device: int, readings: dict[str, int | str | None]) -> str:
    """One CSV row of the NVML log; a reading the GPU does not support is left empty."""
    names = [*list(NVML_COLUMNS)[2:], *NVML_IDENTITY_COLUMNS]
    values = [ts_unix_ns, device, *(readings.get(name) for name in names)]
    return ",".join(cell_text(value) for value in values) + "\n"


def cell_text(value: int | str | None) -> str:
    """A CSV cell: empty for None, text as it is (UUID, bus id), integers in NVML's units."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(int(value))


def visible_variable() -> str | None:
    """CUDA_VISIBLE_DEVICES as this process (and the ranks it launches) has it; None when unset."""
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def visible_fact() -> dict[str, str]:
    """The header fact recording CUDA_VISIBLE_DEVICES, none when unset."""
    visible = visible_variable()
    return {} if visible is None else {VISIBLE_FACT: visible.replace(" ", "")}


class NvmlSampler:
    """Writes `power-<host>-nvml.csv` while active; opens nothing until `start`."""

    source = "nvml"

    def __init__(self, config: SamplerConfig) -> None:
        self.config = config
        self.path = config.log_path(self.source, "csv")
        self.error: PowerSourceError | None = None  # set when sampling stopped early
        self._nvml: Any = None
        self._handles: list[tuple[Any, PhysicalGpu]] = []  # CUDA ordinal order
        self._file: IO[str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> list[str]:
        """Open NVML and the log, take a first sample, start the thread; return the log's name."""
        self._nvml = import_pynvml()
        try:
            self._nvml.nvmlInit()
        except self._nvml.NVMLError as exc:
            raise from_nvml_error(exc, "init") from exc
        try:
            self._handles = self._open_devices()
            self.config.out_dir.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w")
            header = format_log_header(
                source=self.source,
                host=self.config.host,
                interval_ms=self.config.interval_ms,
                clock=NVML_CLOCK,
                **visible_fact(),
            )
            self._file.write(header + NVML_IDENTITY_HEADER + "\n")
            self._sample_all()  # fail here, not silently in the thread
        except BaseException:
            self._close(remove=True)
            raise
        self._thread = threading.Thread(target=self._run, name="tracehouse-nvml", daemon=True)
        self._thread.start()
        return [self.path.name]

    def stop(self) -> None:
        """Stop the thread, close the log and shut NVML down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._close(remove=False)

    def __enter__(self) -> NvmlSampler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _open_devices(self) -> list[tuple[Any, PhysicalGpu]]:
        """The GPUs the run's ranks see (NVML sees every GPU of the host, other jobs' too), by ordinal."""
        nvml = self._nvml
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            gpus = [physical_gpu(nvml, index, handle) for index, handle in enumerate(handles)]
        except nvml.NVMLError as exc:
            raise from_nvml_error(exc, "device enumeration") from exc
        visible = visible_gpus(visible_variable(), gpus)
        if not visible:
            raise PowerSourceError("NVML sees no GPU: check CUDA_VISIBLE_DEVICES and `nvidia-smi -L`")
        return [(handles[gpu.index], gpu) for gpu in visible]

    def _run(self) -> None:
        period_s = self.config.interval_ms / 1000.0
        deadline = time.monotonic() + period_s
        while not self._stop.wait(max(0.0, deadline - time.monotonic())):
            deadline += period_s
            try:
                self._sample_all()
            except PowerSourceError as exc:
                self.error = exc
                log.warning("power sampling stopped early: %s", exc)
                return

    def _sample_all(self) -> None:
        assert self._file is not None
        for ordinal, (handle, gpu) in enumerate(self._handles):
            ts = time.time_ns()
            identity = {"uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id}
            self._file.write(format_row(ts, ordinal, {**self._read(handle), **identity}))
        self._file.flush()

    def _read(self, handle: Any) -> dict[str, int | None]:
        nvml = self._nvml
        queries = {
            "power_mw": lambda: nvml.nvmlDeviceGetPowerUsage(handle),
            "energy_counter_mj": lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle),
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            "gpu_util_pct": lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
            "mem_used_bytes": lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used,
        }
        readings: dict[str, int | None] = {}
        for name, query in queries.items():
            try:
                readings[name] = query()
            except nvml.NVMLError_NotSupported:
                readings[name] = None  # e.g. no energy counter before Volta: the column stays empty
            except nvml.NVMLError as exc:
                raise from_nvml_error(exc, f"read of {name}") from exc
        return readings

    def _close(self, *, remove: bool) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            if remove:
                Path(self.path).unlink(missing_ok=True)
        if self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):  # after a failure: nothing left to do
                self._nvml.nvmlShutdown()
            self._nvml = None


def physical_gpu(nvml: Any, index: int, handle: Any) -> PhysicalGpu:
    """NVML's identity of one GPU (older nvidia-ml-py returns bytes)."""
    uuid, bus_id = nvml.nvmlDeviceGetUUID(handle), nvml.nvmlDeviceGetPciInfo(handle).busId
    return PhysicalGpu(index=index, uuid=as_text(uuid), pci_bus_id=as_text(bus_id))


def as_text(value: str | bytes) -> str:
    """NVML text, decoded where the binding left it bytes."""
    return value.decode() if isinstance(value, bytes) else value


def import_pynvml() -> Any:
    """The pynvml module, or PowerSourceError saying how to install it."""
    try:
        import pynvml
    except ImportError as exc:
        raise PowerSourceError("nvidia-ml-py is not installed: pip install 'tracehouse[collect]'") from exc
    return pynvml
