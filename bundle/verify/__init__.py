"""Floor 14: what a running topology proves: attestation, smoke, bench and their reports."""
