//! A bounded history that the engine appends to and readers see, without a lock, as a
//! [`Shared`] copy inside each published state.
//!
//! Rules:
//! - Items are kept in sealed chunks of [`CHUNK`] behind an `Arc`, plus a short open tail: a
//!   published copy costs one pointer per chunk and at most [`CHUNK`] cloned items, however long
//!   the history (15 minutes of intervals at 10 Hz are 9,000).
//! - The copy is made once per change and shared by every state published until the next one.
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
    tail: Vec<T>,
    shared: Option<Shared<T>>,
}

/// What readers see: the items in order, oldest first.
#[derive(Debug)]
pub struct Shared<T> {
    chunks: Arc<[Arc<[T]>]>,
    skip: usize,
    tail: Arc<[T]>,
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
            shared: None,
        }
    }
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
        self.shared = None;
        self.tail.push(item);
        if self.tail.len() == CHUNK {
            self.sealed
                .push_back(Arc::from(std::mem::take(&mut self.tail)));
        }
    }

    /// Takes back the newest item.
    pub fn pop_back(&mut self) -> Option<T> {
        if self.tail.is_empty() {
            let last = self.sealed.pop_back()?;
            self.tail = last.to_vec();
            if self.sealed.is_empty() {
                // The forgotten front of that chunk is now the tail's.
                self.tail.drain(..self.skip.min(self.tail.len()));
                self.skip = 0;
            }
        }
        self.shared = None;
        self.tail.pop()
    }

    /// Forgets the oldest item.
    pub fn pop_front(&mut self) {
        self.shared = None;
        match self.sealed.front() {
            Some(first) => {
                self.skip += 1;
                if self.skip >= first.len() {
                    self.sealed.pop_front();
                    self.skip = 0;
                }
            }
            None => {
                if !self.tail.is_empty() {
                    self.tail.remove(0);
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
            .chain(self.tail.iter())
    }

    /// What readers see now; copied once per change.
    pub fn shared(&mut self) -> Shared<T> {
        if let Some(s) = &self.shared {
            return s.clone();
        }
        let s = Shared {
            chunks: self.sealed.iter().cloned().collect(),
            skip: self.skip,
            tail: Arc::from(self.tail.as_slice()),
        };
        self.shared = Some(s.clone());
        s
    }
}

impl<T> Shared<T> {
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        let skip = self.skip;
        self.chunks
            .iter()
            .enumerate()
            .flat_map(move |(n, c)| c.iter().skip(if n == 0 { skip } else { 0 }))
            .chain(self.tail.iter())
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
}
