"""What came of runs: charts, comparisons, history, the points table, estimates and exports, computed from the stored results."""
