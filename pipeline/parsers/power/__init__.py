"""Power-log parsers: `parse.parse_power_log(path)` for NVML, dcgmi dmon, nvidia-smi and Prometheus logs."""
