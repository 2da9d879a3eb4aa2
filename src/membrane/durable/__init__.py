"""Durable bookkeeping of delegation: spawn receipts, the outbox of completion notices, and
transcripts."""
