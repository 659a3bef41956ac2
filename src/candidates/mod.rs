//! Candidate derivation (domain.md 3.1): which providers can serve each node under the policy's storage profiles, and the storage rejection evidence of 3.5.
