//! The k-way merge of sorted chains: rows leave in clustering order, and among equal keys in
//! chain order (the chains come in rank order: earlier loads first, then runs in input order).

use arrow::array::RecordBatch;
use arrow_row::Rows;
use parquet::errors::ParquetError;
use ravel_layout::ClusteringOrder;
use serde_json::Value;

use crate::CompactError;
use crate::read::{ChainReader, Slices};

/// One chain's current slice and the next row of it to leave.
struct Cursor {
    batch: RecordBatch,
    keys: Rows,
    next: usize,
    /// Rows below the merge's upper end: the chain's merged rows stop here.
    end: usize,
}

impl Cursor {
    fn key(&self) -> &[u8] {
        self.keys.row(self.next).data()
    }

    /// Has rows left to merge.
    fn active(&self) -> bool {
        self.next < self.end
    }
}

/// Rows of `batch` (in clustering order) whose sort key is below `key` (as
/// `ravel_manifest::key_value` encodes keys).
pub fn rows_below(
    order: &ClusteringOrder,
    batch: &RecordBatch,
    key: &[Value],
) -> Result<usize, CompactError> {
    let columns = order.key_columns(batch)?;
    let at = |i: usize| -> Vec<Value> {
        columns
            .iter()
            .map(|c| ravel_manifest::key_value(c.as_ref(), i))
            .collect()
    };
    let (mut lo, mut hi) = (0, batch.num_rows());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ravel_manifest::compare_keys(&at(mid), key) == std::cmp::Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The rows picked for one batch: which slices they come from, and where in them.
struct Picked {
    slices: Vec<RecordBatch>,
    /// Per chain, the index in `slices` of its current slice, once a row of it is picked.
    slot: Vec<Option<usize>>,
    /// (index in `slices`, row), in merged order.
    rows: Vec<(usize, usize)>,
}

impl Picked {
    /// Takes chain `c`'s next row.
    fn take(&mut self, c: usize, cursor: &mut Cursor) {
        let at = match self.slot[c] {
            Some(at) => at,
            None => {
                self.slices.push(cursor.batch.clone());
                self.slices.len() - 1
            }
        };
        self.slot[c] = Some(at);
        self.rows.push((at, cursor.next));
        cursor.next += 1;
    }
}

/// Merges sorted chains into batches of at most `batch_rows` rows in clustering order.
pub struct Merge {
    readers: Vec<Slices>,
    /// Rows at or above this key stay out of the merge (see [`Merge::into_rest`]).
    below: Option<Vec<Value>>,
    cursors: Vec<Option<Cursor>>,
    /// Chain indices with a cursor, as a binary min-heap by (key, chain).
    heap: Vec<usize>,
    order: ClusteringOrder,
    batch_rows: usize,
    started: bool,
}

impl Merge {
    /// Merges the chains `readers` read, each in a task of its own (one slice ahead).
    pub fn new(readers: Vec<ChainReader>, order: ClusteringOrder, batch_rows: usize) -> Merge {
        let slices = readers.into_iter().map(ChainReader::spawn).collect();
        Merge::bounded(slices, order, batch_rows, None)
    }

    /// Merges the rows of `slices` below the key `below` (every row when `None`); the rows
    /// from there on stay with their chains (see [`Merge::into_rest`]).
    pub fn bounded(
        slices: Vec<Slices>,
        order: ClusteringOrder,
        batch_rows: usize,
        below: Option<Vec<Value>>,
    ) -> Merge {
        let n = slices.len();
        Merge {
            readers: slices,
            below,
            cursors: (0..n).map(|_| None).collect(),
            heap: Vec::with_capacity(n),
            order,
            batch_rows: batch_rows.max(1),
            started: false,
        }
    }

    /// The next merged batch of `batch_rows` rows (fewer only at the end), `None` when every
    /// chain is read. A slice whose rows are all taken stays in hand until the batch is
    /// gathered, so that batches do not end where slices do.
    pub async fn next_batch(&mut self) -> Result<Option<RecordBatch>, CompactError> {
        if !self.started {
            self.start().await?;
        }
        let mut picked = Picked {
            slices: Vec::new(),
            slot: vec![None; self.cursors.len()],
            rows: Vec::with_capacity(self.batch_rows),
        };
        while picked.rows.len() < self.batch_rows {
            let Some(&c) = self.heap.first() else { break };
            let cursor = self.cursors[c].as_mut().expect("in the heap");
            picked.take(c, cursor);
            if cursor.active() {
                self.sift_down(0);
                continue;
            }
            // The chain's rows of this slice are taken: the next slice, unless the merge's
            // upper end lies in this one.
            if cursor.end == cursor.batch.num_rows() {
                self.refill(c).await?;
                picked.slot[c] = None;
            }
            if self.cursors[c].as_ref().is_some_and(Cursor::active) {
                self.sift_down(0);
            } else {
                let last = self.heap.pop().expect("c was on top");
                if !self.heap.is_empty() {
                    self.heap[0] = last;
                    self.sift_down(0);
                }
            }
        }
        if picked.rows.is_empty() {
            return Ok(None);
        }
        let slices: Vec<&RecordBatch> = picked.slices.iter().collect();
        Ok(Some(arrow::compute::interleave_record_batch(
            &slices,
            &picked.rows,
        )?))
    }

    async fn start(&mut self) -> Result<(), CompactError> {
        self.started = true;
        for c in 0..self.readers.len() {
            self.refill(c).await?;
        }
        self.heap = (0..self.cursors.len())
            .filter(|&c| self.cursors[c].as_ref().is_some_and(Cursor::active))
            .collect();
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
        Ok(())
    }

    /// Reads chain `c`'s next slice into its cursor (`None` at its end).
    async fn refill(&mut self, c: usize) -> Result<(), CompactError> {
        self.cursors[c] = match self.readers[c].next().await.map_err(read_error)? {
            Some(batch) if batch.num_rows() > 0 => Some(Cursor {
                keys: self.order.key_rows(&batch)?,
                end: match &self.below {
                    Some(key) => rows_below(&self.order, &batch, key)?,
                    None => batch.num_rows(),
                },
                batch,
                next: 0,
            }),
            _ => None,
        };
        Ok(())
    }

    /// Each chain's rows the merge left (at or above its upper end), in chain order.
    pub fn into_rest(self) -> Vec<Slices> {
        let mut out = self.readers;
        for (c, cursor) in self.cursors.into_iter().enumerate() {
            if let Some(x) = cursor
                && x.next < x.batch.num_rows()
            {
                out[c].put_back(x.batch.slice(x.next, x.batch.num_rows() - x.next));
            }
        }
        out
    }

    /// Whether chain `a`'s next row leaves before chain `b`'s.
    fn before(&self, a: usize, b: usize) -> bool {
        let (x, y) = (
            self.cursors[a].as_ref().expect("in the heap"),
            self.cursors[b].as_ref().expect("in the heap"),
        );
        (x.key(), a) < (y.key(), b)
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut top = i;
            if l < n && self.before(self.heap[l], self.heap[top]) {
                top = l;
            }
            if r < n && self.before(self.heap[r], self.heap[top]) {
                top = r;
            }
            if top == i {
                return;
            }
            self.heap.swap(i, top);
            i = top;
        }
    }
}

pub(crate) fn read_error(source: ParquetError) -> CompactError {
    CompactError::Read { source }
}
