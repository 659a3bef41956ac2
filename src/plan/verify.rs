//! Verification of a stored plan against its request.
