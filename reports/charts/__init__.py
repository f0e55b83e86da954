"""The report's charts: each module a few functions `(connection, study) -> chart` over public views."""
