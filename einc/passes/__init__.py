"""einc's passes, one ModulePass per file named after its flag (policy: where and with what
parameters; the mechanism is in einc.transforms), and `pipeline.py`, which turns pipeline
texts into passes. The registry that names them all is einc.compiler.registry."""
