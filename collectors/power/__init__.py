"""tracehouse.collectors.power."""
