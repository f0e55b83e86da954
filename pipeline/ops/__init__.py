"""FLOPs and bytes moved per host op, from the shapes a Kineto trace records for each `cpu_op`.

`signature` reads an op's `Input Dims`, `Input type` and `Concrete Inputs` texts; `matmul`,
`attention`, `conv` and `pointwise` hold the formulas of each family (docs/flops.md is their
table); `costs` names the formula of each op and evaluates them over a frame of unique signatures,
and states the rule that counts a composite op's FLOPs once (at the innermost op with a formula).
"""
