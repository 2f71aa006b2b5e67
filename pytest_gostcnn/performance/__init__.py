"""Section 9, performance: timed rounds, each cell's image set, computing cells (MPI),
ОРП and the 9.8 evaluation with its compliance and comment (standard.md §7)."""
