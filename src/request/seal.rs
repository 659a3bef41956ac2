//! Sealing: recomputing every derived fingerprint of a hand-written request.
