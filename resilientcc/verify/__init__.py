"""Z3 verification of schedules: lossless, race-free, deadlock-free, failover-lossless."""
