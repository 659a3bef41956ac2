//! jointplan: verified execution plans for ML model graphs.
#![forbid(unsafe_code)]
