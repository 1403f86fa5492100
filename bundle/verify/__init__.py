"""Stage 5: what a running topology proves: attestation, smoke, bench and their reports."""
