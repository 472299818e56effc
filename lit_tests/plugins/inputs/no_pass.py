"""A plugin file without a pass (lit_tests/plugins/load-pass-plugin.mlir)."""

FACTOR = 2
