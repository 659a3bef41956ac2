//! Errors of plan building.
