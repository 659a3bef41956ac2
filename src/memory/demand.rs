//! Dynamic resource demands (rules 1.6, 1.9): validity, evaluation at a runtime shape,
//! the minimum and theoretical maximum shapes, physical quantization, and the binding of a
//! provider's workspace formula to the runtime's sequence and token ceilings.

use std::fmt;

use serde::Serialize;

use crate::request::{ShapeBucket, StorageProfile, WorkspaceSizeFormula};

use super::DynamicResourceDemand;

/// Most buckets a bounded-shape demand may have.
pub const MAXIMUM_SHAPE_BUCKETS: usize = 64;

/// A runtime shape: active sequences, scheduled tokens and pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Shape {
    /// Active sequences.
    pub sequences: u32,
    /// Scheduled tokens.
    pub tokens: u64,
    /// Pages.
    pub pages: u64,
}

impl Shape {
    /// The minimum shape `(1, 1, 1)` every demand must evaluate at.
    pub const MINIMUM: Shape = Shape {
        sequences: 1,
        tokens: 1,
        pages: 1,
    };
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(sequences {}, tokens {}, pages {})",
            self.sequences, self.tokens, self.pages
        )
    }
}

/// `bind_runtime_limits`: the core-bounded demand of a provider workspace formula under the
/// runtime's sequence and token ceilings. Pages keep the provider's bound; buckets are kept.
pub fn bind_runtime_limits(
    formula: &WorkspaceSizeFormula,
    maximum_sequences: u32,
    maximum_tokens: u64,
) -> DynamicResourceDemand {
    match formula {
        WorkspaceSizeFormula::Fixed { bytes } => DynamicResourceDemand::Fixed { bytes: *bytes },
        WorkspaceSizeFormula::ActualSequences { bytes_per_sequence } => {
            DynamicResourceDemand::ActualSequences {
                bytes_per_sequence: *bytes_per_sequence,
                maximum_sequences,
            }
        }
        WorkspaceSizeFormula::Tokens { bytes_per_token } => DynamicResourceDemand::Tokens {
            bytes_per_token: *bytes_per_token,
            maximum_tokens,
        },
        WorkspaceSizeFormula::Affine {
            fixed_bytes,
            bytes_per_sequence,
            bytes_per_token,
        } => DynamicResourceDemand::Affine {
            fixed_bytes: *fixed_bytes,
            bytes_per_sequence: *bytes_per_sequence,
            maximum_sequences,
            bytes_per_token: *bytes_per_token,
            maximum_tokens,
        },
        WorkspaceSizeFormula::Pages {
            bytes_per_page,
            maximum_pages,
        } => DynamicResourceDemand::Pages {
            bytes_per_page: *bytes_per_page,
            maximum_pages: *maximum_pages,
        },
        WorkspaceSizeFormula::BoundedShapeBuckets { buckets } => {
            DynamicResourceDemand::BoundedShapeBuckets {
                buckets: buckets.clone(),
            }
        }
    }
}

fn product(per_unit: u64, count: u64, what: &str) -> Result<u64, String> {
    per_unit
        .checked_mul(count)
        .ok_or_else(|| format!("{what} {per_unit} x {count} overflows u64"))
}

/// Why a demand is invalid, if it is: zero per-unit terms or maxima, overflow at the maxima,
/// or a bucket list that is empty, too long or not a strictly growing chain.
pub fn demand_problem(demand: &DynamicResourceDemand) -> Option<String> {
    demand_check(demand).err()
}

fn demand_check(demand: &DynamicResourceDemand) -> Result<(), String> {
    match demand {
        DynamicResourceDemand::Fixed { bytes } => {
            if *bytes == 0 {
                return Err("fixed demand of zero bytes".to_owned());
            }
        }
        DynamicResourceDemand::ActualSequences {
            bytes_per_sequence,
            maximum_sequences,
        } => per_unit_check(
            "actual_sequences",
            "sequence",
            *bytes_per_sequence,
            u64::from(*maximum_sequences),
        )?,
        DynamicResourceDemand::Tokens {
            bytes_per_token,
            maximum_tokens,
        } => per_unit_check("tokens", "token", *bytes_per_token, *maximum_tokens)?,
        DynamicResourceDemand::Affine {
            fixed_bytes,
            bytes_per_sequence,
            maximum_sequences,
            bytes_per_token,
            maximum_tokens,
        } => {
            if *bytes_per_sequence == 0 && *bytes_per_token == 0 {
                return Err("affine demand has no per-sequence or per-token term".to_owned());
            }
            if *maximum_sequences == 0 || *maximum_tokens == 0 {
                return Err("affine demand has a zero sequence or token maximum".to_owned());
            }
            let sequences = product(
                *bytes_per_sequence,
                u64::from(*maximum_sequences),
                "bytes per sequence x maximum sequences",
            )?;
            let tokens = product(
                *bytes_per_token,
                *maximum_tokens,
                "bytes per token x maximum tokens",
            )?;
            fixed_bytes
                .checked_add(sequences)
                .and_then(|s| s.checked_add(tokens))
                .ok_or_else(|| "affine demand at its maxima overflows u64".to_owned())?;
        }
        DynamicResourceDemand::Pages {
            bytes_per_page,
            maximum_pages,
        } => per_unit_check("pages", "page", *bytes_per_page, *maximum_pages)?,
        DynamicResourceDemand::BoundedShapeBuckets { buckets } => buckets_check(buckets)?,
    }
    Ok(())
}

/// The check shared by the single-term demands (`actual_sequences`, `tokens`, `pages`): a
/// non-zero bytes-per-`unit` term and maximum whose product fits in u64.
fn per_unit_check(kind: &str, unit: &str, per_unit: u64, maximum: u64) -> Result<(), String> {
    if per_unit == 0 || maximum == 0 {
        return Err(format!(
            "{kind} demand needs non-zero bytes per {unit} and maximum \
             (got {per_unit} x {maximum})"
        ));
    }
    product(
        per_unit,
        maximum,
        &format!("bytes per {unit} x maximum {unit}s"),
    )?;
    Ok(())
}

fn buckets_check(buckets: &[ShapeBucket]) -> Result<(), String> {
    if buckets.is_empty() || buckets.len() > MAXIMUM_SHAPE_BUCKETS {
        return Err(format!(
            "bounded_shape_buckets demand has {} buckets (1..={MAXIMUM_SHAPE_BUCKETS})",
            buckets.len()
        ));
    }
    for (index, bucket) in buckets.iter().enumerate() {
        if bucket.maximum_sequences == 0
            || bucket.maximum_tokens == 0
            || bucket.maximum_pages == 0
            || bucket.bytes == 0
        {
            return Err(format!("bucket {index} has a zero field"));
        }
    }
    for (index, pair) in buckets.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        let grows = b.maximum_sequences >= a.maximum_sequences
            && b.maximum_tokens >= a.maximum_tokens
            && b.maximum_pages >= a.maximum_pages
            && (b.maximum_sequences > a.maximum_sequences
                || b.maximum_tokens > a.maximum_tokens
                || b.maximum_pages > a.maximum_pages)
            && b.bytes >= a.bytes;
        if !grows {
            return Err(format!(
                "bucket {} does not strictly extend bucket {index} (maxima must not shrink, \
                 one must grow, bytes must not shrink)",
                index + 1
            ));
        }
    }
    Ok(())
}

/// The logical bytes of `demand` at `shape`. Counts must be non-zero and within the
/// demand's maxima; buckets take the first covering bucket; a zero result is an error.
pub fn evaluate(demand: &DynamicResourceDemand, shape: Shape) -> Result<u64, String> {
    if shape.sequences == 0 || shape.tokens == 0 || shape.pages == 0 {
        return Err(format!("shape {shape} has a zero count"));
    }
    let bytes = match demand {
        DynamicResourceDemand::Fixed { bytes } => *bytes,
        DynamicResourceDemand::ActualSequences {
            bytes_per_sequence,
            maximum_sequences,
        } => {
            if shape.sequences > *maximum_sequences {
                return Err(format!(
                    "{} sequences exceed the demand's maximum {maximum_sequences}",
                    shape.sequences
                ));
            }
            product(
                *bytes_per_sequence,
                u64::from(shape.sequences),
                "bytes per sequence x sequences",
            )?
        }
        DynamicResourceDemand::Tokens {
            bytes_per_token,
            maximum_tokens,
        } => {
            if shape.tokens > *maximum_tokens {
                return Err(format!(
                    "{} tokens exceed the demand's maximum {maximum_tokens}",
                    shape.tokens
                ));
            }
            product(*bytes_per_token, shape.tokens, "bytes per token x tokens")?
        }
        DynamicResourceDemand::Affine {
            fixed_bytes,
            bytes_per_sequence,
            maximum_sequences,
            bytes_per_token,
            maximum_tokens,
        } => {
            if shape.sequences > *maximum_sequences || shape.tokens > *maximum_tokens {
                return Err(format!(
                    "shape {shape} exceeds the affine maxima ({maximum_sequences} sequences, \
                     {maximum_tokens} tokens)"
                ));
            }
            let sequences = product(
                *bytes_per_sequence,
                u64::from(shape.sequences),
                "bytes per sequence x sequences",
            )?;
            let tokens = product(*bytes_per_token, shape.tokens, "bytes per token x tokens")?;
            fixed_bytes
                .checked_add(sequences)
                .and_then(|s| s.checked_add(tokens))
                .ok_or_else(|| format!("affine demand at {shape} overflows u64"))?
        }
        DynamicResourceDemand::Pages {
            bytes_per_page,
            maximum_pages,
        } => {
            if shape.pages > *maximum_pages {
                return Err(format!(
                    "{} pages exceed the demand's maximum {maximum_pages}",
                    shape.pages
                ));
            }
            product(*bytes_per_page, shape.pages, "bytes per page x pages")?
        }
        DynamicResourceDemand::BoundedShapeBuckets { buckets } => buckets
            .iter()
            .find(|b| {
                shape.sequences <= b.maximum_sequences
                    && shape.tokens <= b.maximum_tokens
                    && shape.pages <= b.maximum_pages
            })
            .map(|b| b.bytes)
            .ok_or_else(|| format!("no bucket covers shape {shape}"))?,
    };
    if bytes == 0 {
        return Err(format!("demand evaluates to zero bytes at {shape}"));
    }
    Ok(bytes)
}

/// The theoretical maximum shape of a demand: fixed (1,1,1), sequences (max,1,1), tokens
/// (1,max,1), affine (max sequences, max tokens, 1), pages (1,1,max), buckets the last
/// bucket's maxima (an empty bucket list has none).
pub fn theoretical_maximum_shape(demand: &DynamicResourceDemand) -> Option<Shape> {
    Some(match demand {
        DynamicResourceDemand::Fixed { .. } => Shape::MINIMUM,
        DynamicResourceDemand::ActualSequences {
            maximum_sequences, ..
        } => Shape {
            sequences: *maximum_sequences,
            ..Shape::MINIMUM
        },
        DynamicResourceDemand::Tokens { maximum_tokens, .. } => Shape {
            tokens: *maximum_tokens,
            ..Shape::MINIMUM
        },
        DynamicResourceDemand::Affine {
            maximum_sequences,
            maximum_tokens,
            ..
        } => Shape {
            sequences: *maximum_sequences,
            tokens: *maximum_tokens,
            pages: 1,
        },
        DynamicResourceDemand::Pages { maximum_pages, .. } => Shape {
            pages: *maximum_pages,
            ..Shape::MINIMUM
        },
        DynamicResourceDemand::BoundedShapeBuckets { buckets } => {
            let last = buckets.last()?;
            Shape {
                sequences: last.maximum_sequences,
                tokens: last.maximum_tokens,
                pages: last.maximum_pages,
            }
        }
    })
}

/// The physically quantized bytes of `demand` at `shape` under `profile` and `alignment`.
pub fn quantized_bytes(
    demand: &DynamicResourceDemand,
    shape: Shape,
    profile: &StorageProfile,
    alignment: u64,
) -> Result<u64, String> {
    let logical = evaluate(demand, shape)?;
    profile.quantize(logical, alignment).ok_or_else(|| {
        format!("{logical} bytes quantized to alignment {alignment} under {profile} overflow u64")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{StorageAllocator, StorageView};

    fn block(bytes: u64) -> StorageProfile {
        StorageProfile {
            allocator: StorageAllocator::FixedBlockArena { block_bytes: bytes },
            view: StorageView::Contiguous,
        }
    }

    #[test]
    fn tokens_on_blocks_quantize_to_the_block() {
        let demand = DynamicResourceDemand::Tokens {
            bytes_per_token: 1,
            maximum_tokens: 4097,
        };
        assert_eq!(evaluate(&demand, Shape::MINIMUM), Ok(1));
        assert_eq!(
            quantized_bytes(&demand, Shape::MINIMUM, &block(4096), 16),
            Ok(4096)
        );
        let max = theoretical_maximum_shape(&demand).unwrap();
        assert_eq!(max.tokens, 4097);
        assert_eq!(quantized_bytes(&demand, max, &block(4096), 16), Ok(8192));
    }

    #[test]
    fn evaluation_bounds_and_buckets() {
        let affine = DynamicResourceDemand::Affine {
            fixed_bytes: 10,
            bytes_per_sequence: 3,
            maximum_sequences: 2,
            bytes_per_token: 5,
            maximum_tokens: 8,
        };
        let shape = Shape {
            sequences: 2,
            tokens: 8,
            pages: 1,
        };
        assert_eq!(evaluate(&affine, shape), Ok(10 + 6 + 40));
        assert!(evaluate(
            &affine,
            Shape {
                sequences: 3,
                ..shape
            }
        )
        .is_err());
        let buckets = DynamicResourceDemand::BoundedShapeBuckets {
            buckets: vec![
                ShapeBucket {
                    maximum_sequences: 1,
                    maximum_tokens: 1,
                    maximum_pages: 1,
                    bytes: 100,
                },
                ShapeBucket {
                    maximum_sequences: 4,
                    maximum_tokens: 64,
                    maximum_pages: 1,
                    bytes: 400,
                },
            ],
        };
        assert_eq!(demand_problem(&buckets), None);
        assert_eq!(evaluate(&buckets, Shape::MINIMUM), Ok(100));
        assert_eq!(evaluate(&buckets, shape), Ok(400));
        assert!(evaluate(&buckets, Shape { pages: 2, ..shape }).is_err());
        assert!(evaluate(
            &buckets,
            Shape {
                sequences: 0,
                ..shape
            }
        )
        .is_err());
    }

    #[test]
    fn invalid_demands_are_named() {
        assert!(demand_problem(&DynamicResourceDemand::Fixed { bytes: 0 }).is_some());
        assert!(demand_problem(&DynamicResourceDemand::Tokens {
            bytes_per_token: u64::MAX,
            maximum_tokens: 2
        })
        .is_some());
        assert!(demand_problem(&DynamicResourceDemand::BoundedShapeBuckets {
            buckets: vec![
                ShapeBucket {
                    maximum_sequences: 2,
                    maximum_tokens: 2,
                    maximum_pages: 1,
                    bytes: 10
                };
                2
            ]
        })
        .is_some());
    }

    #[test]
    fn single_term_demands_name_their_term() {
        let problem = |demand| demand_problem(&demand).unwrap_or_default();
        assert_eq!(
            problem(DynamicResourceDemand::ActualSequences {
                bytes_per_sequence: 0,
                maximum_sequences: 4
            }),
            "actual_sequences demand needs non-zero bytes per sequence and maximum (got 0 x 4)"
        );
        assert_eq!(
            problem(DynamicResourceDemand::Tokens {
                bytes_per_token: u64::MAX,
                maximum_tokens: 2
            }),
            format!(
                "bytes per token x maximum tokens {} x 2 overflows u64",
                u64::MAX
            )
        );
        assert_eq!(
            problem(DynamicResourceDemand::Pages {
                bytes_per_page: 64,
                maximum_pages: 0
            }),
            "pages demand needs non-zero bytes per page and maximum (got 64 x 0)"
        );
        assert_eq!(
            demand_problem(&DynamicResourceDemand::Pages {
                bytes_per_page: 64,
                maximum_pages: 9
            }),
            None
        );
    }

    #[test]
    fn runtime_limits_bind_per_formula() {
        assert_eq!(
            bind_runtime_limits(
                &WorkspaceSizeFormula::Pages {
                    bytes_per_page: 64,
                    maximum_pages: 9
                },
                3,
                4096
            ),
            DynamicResourceDemand::Pages {
                bytes_per_page: 64,
                maximum_pages: 9
            }
        );
        assert_eq!(
            bind_runtime_limits(
                &WorkspaceSizeFormula::ActualSequences {
                    bytes_per_sequence: 8
                },
                3,
                4096
            ),
            DynamicResourceDemand::ActualSequences {
                bytes_per_sequence: 8,
                maximum_sequences: 3
            }
        );
    }
}
