//! A bounded history that the engine appends to and readers see, without a lock, as a
//! [`Shared`] copy inside each published state.
//!
//! Rules:
//! - Items are kept in sealed chunks of [`CHUNK`] behind an `Arc`, plus a short open tail whose
//!   items are each behind an `Arc` of their own: a published copy costs one pointer per chunk and
//!   one per tail item, and no item is cloned for it, however long the history (15 minutes of
//!   intervals at 10 Hz are 9,000). An item is cloned once at most, when its chunk is sealed
//!   while a published copy still holds it.
//! - The list of chunks is copied once per change of the chunks (a chunk sealed or dropped), the
//!   tail once per change of the tail; both are shared by every state published until then.
//! - Old items leave from the front (a chunk is dropped whole once all of it is old); the newest
//!   may be taken back (a wall clock that went back, an interval sampled again).

use std::collections::VecDeque;
use std::sync::Arc;

/// Items per sealed chunk.
pub const CHUNK: usize = 64;

/// The engine's side: appended to, trimmed at both ends.
#[derive(Debug)]
pub struct Ring<T> {
    sealed: VecDeque<Arc<[T]>>,
    /// Items of the first sealed chunk (or of the tail, without one) already forgotten.
    skip: usize,
    tail: Vec<Arc<T>>,
    /// The chunks and the tail as last published; `None` once they changed.
    shared_chunks: Option<Arc<[Arc<[T]>]>>,
    shared_tail: Option<Arc<[Arc<T>]>>,
}

/// What readers see: the items in order, oldest first.
#[derive(Debug)]
pub struct Shared<T> {
    chunks: Arc<[Arc<[T]>]>,
    skip: usize,
    tail: Arc<[Arc<T>]>,
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            chunks: Arc::clone(&self.chunks),
            skip: self.skip,
            tail: Arc::clone(&self.tail),
        }
    }
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            chunks: Arc::from([]),
            skip: 0,
            tail: Arc::from([]),
        }
    }
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            sealed: VecDeque::new(),
            skip: 0,
            tail: Vec::new(),
            shared_chunks: None,
            shared_tail: None,
        }
    }
}

/// The item itself, cloned only where a published copy still holds it.
fn owned<T: Clone>(item: Arc<T>) -> T {
    Arc::try_unwrap(item).unwrap_or_else(|shared| (*shared).clone())
}

impl<T: Clone> Ring<T> {
    pub fn from_items(items: impl IntoIterator<Item = T>) -> Self {
        let mut ring = Ring::default();
        for item in items {
            ring.push_back(item);
        }
        ring
    }

    pub fn push_back(&mut self, item: T) {
        self.shared_tail = None;
        self.tail.push(Arc::new(item));
        if self.tail.len() == CHUNK {
            let items: Vec<T> = std::mem::take(&mut self.tail)
                .into_iter()
                .map(owned)
                .collect();
            self.sealed.push_back(Arc::from(items));
            self.shared_chunks = None;
        }
    }

    /// Takes back the newest item.
    pub fn pop_back(&mut self) -> Option<T> {
        if self.tail.is_empty() {
            let last = self.sealed.pop_back()?;
            self.shared_chunks = None;
            self.tail = last.iter().cloned().map(Arc::new).collect();
            if self.sealed.is_empty() {
                // The forgotten front of that chunk is now the tail's.
                self.tail.drain(..self.skip.min(self.tail.len()));
                self.skip = 0;
            }
        }
        self.shared_tail = None;
        self.tail.pop().map(owned)
    }

    /// Forgets the oldest item.
    pub fn pop_front(&mut self) {
        match self.sealed.front() {
            Some(first) => {
                self.skip += 1;
                if self.skip >= first.len() {
                    self.sealed.pop_front();
                    self.shared_chunks = None;
                    self.skip = 0;
                }
            }
            None => {
                if !self.tail.is_empty() {
                    self.tail.remove(0);
                    self.shared_tail = None;
                }
            }
        }
    }

    pub fn front(&self) -> Option<&T> {
        self.iter().next()
    }

    pub fn back(&self) -> Option<&T> {
        self.tail
            .last()
            .map(|item| &**item)
            .or_else(|| self.sealed.back().and_then(|c| c.last()))
    }

    pub fn len(&self) -> usize {
        self.sealed.iter().map(|c| c.len()).sum::<usize>() - self.skip + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        let skip = self.skip;
        self.sealed
            .iter()
            .enumerate()
            .flat_map(move |(n, c)| c.iter().skip(if n == 0 { skip } else { 0 }))
            .chain(self.tail.iter().map(|item| &**item))
    }

    /// What readers see now: the chunks and the tail copied once per change of each.
    pub fn shared(&mut self) -> Shared<T> {
        let chunks = Arc::clone(
            self.shared_chunks
                .get_or_insert_with(|| self.sealed.iter().cloned().collect()),
        );
        let tail = Arc::clone(
            self.shared_tail
                .get_or_insert_with(|| self.tail.iter().cloned().collect()),
        );
        Shared {
            chunks,
            skip: self.skip,
            tail,
        }
    }
}

impl<T> Shared<T> {
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        let skip = self.skip;
        self.chunks
            .iter()
            .enumerate()
            .flat_map(move |(n, c)| c.iter().skip(if n == 0 { skip } else { 0 }))
            .chain(self.tail.iter().map(|item| &**item))
    }

    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum::<usize>() - self.skip + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring and what a reader saw agree with a plain queue after each step.
    fn agree(ring: &mut Ring<u32>, model: &VecDeque<u32>) {
        let want: Vec<u32> = model.iter().copied().collect();
        assert_eq!(ring.iter().copied().collect::<Vec<_>>(), want);
        assert_eq!(ring.iter().rev().count(), want.len());
        assert_eq!(ring.len(), want.len());
        assert_eq!(ring.back(), model.back());
        assert_eq!(ring.front(), model.front());
        let shared = ring.shared();
        assert_eq!(shared.iter().copied().collect::<Vec<_>>(), want);
        assert_eq!(shared.len(), want.len());
    }

    #[test]
    fn a_ring_keeps_the_order_of_a_queue_through_pushes_and_trims_at_both_ends() {
        let mut ring = Ring::default();
        let mut model = VecDeque::new();
        // A fixed xorshift sequence of operations, crossing chunk edges many times.
        let mut x: u32 = 0x9e37_79b9;
        for n in 0..5_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            match x % 8 {
                0 => {
                    assert_eq!(ring.pop_back(), model.pop_back());
                }
                1 | 2 => {
                    ring.pop_front();
                    model.pop_front();
                }
                _ => {
                    ring.push_back(n);
                    model.push_back(n);
                }
            }
            agree(&mut ring, &model);
        }
        assert!(model.len() > 2 * CHUNK, "the test crossed chunks");
    }

    #[test]
    fn a_published_copy_shares_sealed_chunks_and_does_not_change_after_it_was_taken() {
        let mut ring = Ring::from_items(0..(3 * CHUNK as u32 + 5));
        let before = ring.shared();
        let again = ring.shared();
        assert!(
            Arc::ptr_eq(&before.chunks, &again.chunks),
            "one copy per change"
        );
        ring.push_back(1_000);
        ring.pop_front();
        let after = ring.shared();
        assert!(Arc::ptr_eq(&before.chunks[1], &after.chunks[1]));
        assert_eq!(before.iter().next(), Some(&0));
        assert_eq!(before.len(), 3 * CHUNK + 5);
        assert_eq!(after.iter().next(), Some(&1));
        assert_eq!(after.iter().last(), Some(&1_000));
    }

    /// An item that counts its clones.
    #[derive(Debug)]
    struct Counted(Arc<std::sync::atomic::AtomicUsize>);

    impl Clone for Counted {
        fn clone(&self) -> Self {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Counted(Arc::clone(&self.0))
        }
    }

    #[test]
    fn publishing_after_every_push_clones_no_item_and_a_seal_clones_only_what_a_reader_holds() {
        let clones = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = || clones.load(std::sync::atomic::Ordering::SeqCst);
        let mut ring = Ring::default();
        // A full chunk and most of the next, published after each push as the engine does:
        // copying the tail each time would have cloned 1 + 2 + ... items.
        for _ in 0..(CHUNK + CHUNK / 2) {
            ring.push_back(Counted(Arc::clone(&clones)));
            let _ = ring.shared();
        }
        assert_eq!(count(), 0);
        // A reader holds the tail's 32 items when the 64th arrives: those 32 are cloned into
        // the sealed chunk, once each, and the reader's copy stays as it was.
        let held = ring.shared();
        for _ in 0..(CHUNK / 2) {
            ring.push_back(Counted(Arc::clone(&clones)));
        }
        assert_eq!(count(), CHUNK / 2);
        assert_eq!(held.len(), CHUNK + CHUNK / 2);
        assert_eq!(ring.len(), 2 * CHUNK);
    }

    #[test]
    fn the_list_of_chunks_is_copied_only_when_a_chunk_is_sealed_or_dropped() {
        let mut ring = Ring::from_items(0..(2 * CHUNK as u32 + 1));
        let first = ring.shared();
        ring.push_back(1_000);
        ring.pop_front();
        let second = ring.shared();
        assert!(Arc::ptr_eq(&first.chunks, &second.chunks));
        assert!(!Arc::ptr_eq(&first.tail, &second.tail));
        assert_eq!(second.iter().next(), Some(&1));
        for n in 0..(CHUNK as u32) {
            ring.push_back(2_000 + n);
        }
        let third = ring.shared();
        assert!(
            !Arc::ptr_eq(&second.chunks, &third.chunks),
            "a chunk was sealed"
        );
        assert_eq!(third.len(), 3 * CHUNK + 1);
        assert_eq!(second.len(), 2 * CHUNK + 1);
    }
}
