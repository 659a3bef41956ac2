//! Load-time validation of a plan request (domain.md 1.1-1.8).
