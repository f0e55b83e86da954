"""The Kineto trace parser: `parse.parse_trace(path)`, one pure function per rank trace.

The C scanner (`scanner/`, built as `_kineto_scan`) and the msgspec decoder (`decode`,
`chunks`) read a trace into the same columns; `events`, `meta`, `steps` and `collectives`
build the frames the warehouse stores.
"""
