"""Amaranth generators for the 4-bit block floating-point dot-product units."""
