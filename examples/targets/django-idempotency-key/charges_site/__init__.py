"""A minimal Django charge service behind django-idempotency-key: a target for idem-harness."""
