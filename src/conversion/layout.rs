//! How a converted tensor's rows come from its source tensors: the transforms llama.cpp's
//! converter applies all move whole rows (a row being everything after the first dimension),
//! so one map from target row to (source, source row) undoes each of them.

/// A run of target rows taken from one source tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    /// Index into the pair's source tensors.
    pub source: usize,
    /// Target rows this part fills.
    pub rows: u64,
    /// The converter's Q/K head permutation with this many heads was applied to these rows.
    pub heads: Option<u64>,
    /// Source rows before the first one the target holds (cut by the converter).
    pub skip_rows: u64,
}

/// The target's rows, part after part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RowMap {
    /// Elements per row, the same on both sides.
    pub cols: u64,
    pub parts: Vec<Part>,
    /// Each part is a block of source rows transposed: the part's `rows` target rows of `cols`
    /// elements are source rows `skip_rows..skip_rows + cols`, each `rows` long, transposed (a
    /// whole matrix: one part; a split transposed per head: one part per head).
    pub transposed: bool,
}

impl RowMap {
    pub(super) fn target_elements(&self) -> u64 {
        self.parts.iter().map(|p| p.rows).sum::<u64>() * self.cols
    }

    /// The source (index) and source element of target element `i` of a transposed map.
    pub(super) fn transposed_element(&self, i: u64) -> (usize, u64) {
        let (mut row, col) = (i / self.cols, i % self.cols);
        for part in &self.parts {
            if row < part.rows {
                return (part.source, (part.skip_rows + col) * part.rows + row);
            }
            row -= part.rows;
        }
        unreachable!("element {i} past the parts (checked when the map was built)")
    }

    /// The source (index) and source row of target row `row`.
    pub(super) fn source_row(&self, mut row: u64) -> (usize, u64) {
        for part in &self.parts {
            if row < part.rows {
                let within = match part.heads {
                    Some(heads) => unpermuted_row(row, part.rows, heads),
                    None => row,
                };
                return (part.source, within + part.skip_rows);
            }
            row -= part.rows;
        }
        unreachable!("row {row} past the parts (checked when the map was built)")
    }
}

/// The source row that `LlamaModel.permute(w, n_head)` of convert_hf_to_gguf.py moves to row
/// `row`: it views the rows as [heads, 2, rows / heads / 2] and swaps the last two axes, so
/// that each head's rotary halves are interleaved as ggml expects.
/// Rows that cannot be permuted ([`permutable`] is false) are their own source.
pub(super) fn unpermuted_row(row: u64, rows: u64, heads: u64) -> u64 {
    if !permutable(rows, heads) || rows == 0 {
        return row;
    }
    let half = rows / heads / 2;
    let (head, within) = (row / (2 * half), row % (2 * half));
    head * 2 * half + (within % 2) * half + within / 2
}

/// Whether `rows` can be permuted with `heads` heads. A head count comes from the file (a PR's
/// GGUF may say 2^63 + 1): twice it must not wrap.
pub(super) fn permutable(rows: u64, heads: u64) -> bool {
    heads
        .checked_mul(2)
        .is_some_and(|twice| heads > 0 && rows.is_multiple_of(twice))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numpy: w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2).reshape(w.shape)
    fn permute(rows: u64, heads: u64) -> Vec<u64> {
        let half = rows / heads / 2;
        let mut out = Vec::new();
        for h in 0..heads {
            for i in 0..half {
                for t in 0..2 {
                    out.push(h * 2 * half + t * half + i);
                }
            }
        }
        out
    }

    #[test]
    fn the_permutation_is_undone_row_by_row() {
        for (rows, heads) in [(1 << 63, 1 << 63), (2, (1 << 63) + 1), (8, 0)] {
            assert!(!permutable(rows, heads), "{rows} {heads}");
            assert_eq!(unpermuted_row(1, rows, heads), 1);
        }
        for (rows, heads) in [(8, 2), (64, 4), (32, 8), (12, 3)] {
            let expected = permute(rows, heads);
            let got: Vec<u64> = (0..rows).map(|r| unpermuted_row(r, rows, heads)).collect();
            assert_eq!(got, expected, "rows {rows}, heads {heads}");
        }
    }

    #[test]
    fn parts_follow_each_other() {
        let map = RowMap {
            cols: 4,
            parts: vec![
                Part {
                    source: 0,
                    rows: 2,
                    heads: None,
                    skip_rows: 0,
                },
                Part {
                    source: 1,
                    rows: 3,
                    heads: None,
                    skip_rows: 2,
                },
            ],
            transposed: false,
        };
        assert_eq!(map.target_elements(), 20);
        assert_eq!(map.source_row(1), (0, 1));
        assert_eq!(map.source_row(2), (1, 2));
        assert_eq!(map.source_row(4), (1, 4));
    }
}
