"""FLOPs and bytes moved per host op, from the shapes a Kineto trace records for each `cpu_op`.

`signature` reads an op's `Input Dims`, `Input type` and `Concrete Inputs` texts; `matmul`,
`attention`, `conv` and `pointwise` hold the formulas of each family (docs/flops.md is their
table); `costs` names the formula of each op and evaluates them over a frame of unique signatures,
and states the rule that counts a composite op's FLOPs once (at the innermost op with a formula).
`calltree` and `tree_facts` walk a trace's host call tree as whole arrays; `calls` computes each
host call's `op_calls` row from one trace's frames (the ingest task writes them with the trace);
`store` computes them for traces stored without them (an older tracehouse, other formulas).
"""
