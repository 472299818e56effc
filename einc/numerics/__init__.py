"""Per-pass numerical checking (`--check-numerics`): see einc.numerics.types."""
