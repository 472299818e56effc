"""What a program means, executed directly: `reference.py` (the float64 NumPy reference of the
`ein` level), `loops.py` (the per-element interpreter of loop-level IR) and `egpu/` (any level
below `ein`, kernels run as lanes, with a race detector)."""
