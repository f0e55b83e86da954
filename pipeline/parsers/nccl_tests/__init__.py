"""The nccl-tests output parser: `parse.parse_nccl_tests(path)`, one pure function per output file.

`format` holds what the lines of NVIDIA nccl-tests output look like (discovery's sniffer reads
it too), `table` reads the column header and result rows, `result` holds the frozen results
and their frame, `parse` walks a file's lines and splits it into tests.
"""
