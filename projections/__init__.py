"""Read side: projections rebuilt from the event log."""
