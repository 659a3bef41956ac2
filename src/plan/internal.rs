//! Internal validation of a built or stored plan (domain.md section 6).
