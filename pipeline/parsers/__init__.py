"""tracehouse.pipeline.parsers."""
