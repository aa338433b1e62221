//! The runs of blocks one `LOOKUPS` call asks the cache about (`cache_api`): each
//! `first | n << RUN_SHIFT`.

/// The most blocks one `LOOKUP` run may have.
pub const MAX_LOOKUP: u64 = 8;
/// Where a run's length sits in its word (the first block below it).
pub const RUN_SHIFT: u32 = 56;
/// The most blocks one `LOOKUPS` may ask about: with the principal, the count and
/// the last word, its answer fits in one message (64 words).
pub const MAX_RUN_BLOCKS: u64 = 56;

/// A run's word.
pub fn run_word(first: u64, n: u64) -> u64 {
    first | n << RUN_SHIFT
}

/// A run's first block and length.
pub fn run_of(w: u64) -> (u64, u64) {
    (w & ((1 << RUN_SHIFT) - 1), w >> RUN_SHIFT)
}

/// Whether `runs` is a `LOOKUPS` request's list: at least one run, each of 1 to
/// `MAX_LOOKUP` blocks that end by block 2^`RUN_SHIFT`, `MAX_RUN_BLOCKS` in all.
pub fn runs_fit(runs: &[u64]) -> bool {
    let mut total = 0u64;
    !runs.is_empty()
        && runs.iter().all(|&w| {
            let (first, n) = run_of(w);
            total += n;
            (1..=MAX_LOOKUP).contains(&n) && first + n <= 1 << RUN_SHIFT
        })
        && total <= MAX_RUN_BLOCKS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_checked() {
        assert_eq!(run_of(run_word(12345, 8)), (12345, 8));
        assert!(runs_fit(&[run_word(0, 1), run_word(100, 8)]));
        assert!(!runs_fit(&[]), "no run");
        assert!(!runs_fit(&[run_word(5, 0)]), "an empty run");
        assert!(!runs_fit(&[run_word(5, 9)]), "past MAX_LOOKUP");
        assert!(!runs_fit(&[u64::MAX]), "a length of 255");
        assert!(!runs_fit(&[run_word((1 << RUN_SHIFT) - 2, 4)]), "past the last block");
        assert!(runs_fit(&[run_word((1 << RUN_SHIFT) - 4, 4)]));
        assert!(runs_fit(&[run_word(0, 8); 7]), "56 blocks");
        assert!(
            !runs_fit(&[
                run_word(0, 8),
                run_word(0, 8),
                run_word(0, 8),
                run_word(0, 8),
                run_word(0, 8),
                run_word(0, 8),
                run_word(0, 8),
                run_word(0, 1)
            ]),
            "57 blocks"
        );
    }
}
