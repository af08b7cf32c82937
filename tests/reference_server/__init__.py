"""The reference server's own suite: its protocol, faults and flaws, against live processes."""
