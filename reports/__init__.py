"""tracehouse.reports."""
