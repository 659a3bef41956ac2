//! The build pipeline (domain.md 2.1).
