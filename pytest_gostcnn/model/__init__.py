"""The standard's model of a CNN: the nine layer types, the network tables and their loader,
the one executor of the four training steps, Table 1's MAC counts and section 8's data draws
(standard.md §2–§5)."""
