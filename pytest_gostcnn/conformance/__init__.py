"""Section 8, verification: СКО against the float64 reference, СКОП from the error model of
each data type, and the single-layer cases every backend is verified on (standard.md §6)."""
