"""tracehouse.pipeline."""
