"""Flow-level simulator of schedules on topologies with failures."""
