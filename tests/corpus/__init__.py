"""A corpus of small, independent, correct idempotency-key services (and their named flaws),
each choosing differently where the IETF draft and Stripe leave room; see README.md."""
