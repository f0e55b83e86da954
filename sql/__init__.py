"""tracehouse.sql."""
