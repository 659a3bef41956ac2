//! Per-node checks of plan building (domain.md 2.2-2.7).
