"""The asset graph, one module per stage: suite inputs, the warehouse, and what follows."""
