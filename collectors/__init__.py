"""tracehouse.collectors."""
