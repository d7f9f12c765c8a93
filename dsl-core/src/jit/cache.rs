//! A map whose entries are each made once, by whichever caller asks first.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

/// `get_or_try_init` runs `init` once per key. The map's own lock is held only to find or
/// insert a key's slot; the slot's lock is held while `init` runs, so callers asking for
/// the same key wait for that one `init`, and callers asking for other keys (a different
/// kernel being traced and JIT-compiled, which takes milliseconds) are not held up.
pub(crate) struct OnceMap<K, V> {
    slots: Mutex<HashMap<K, Arc<Mutex<Option<V>>>>>,
}

impl<K, V> Default for OnceMap<K, V> {
    fn default() -> Self {
        OnceMap {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> OnceMap<K, V> {
    /// The value for `key`, made by `init` if no earlier call made it. An `init` that fails
    /// (or panics) leaves the slot empty, so a later call tries again.
    pub(crate) fn get_or_try_init<E>(
        &self,
        key: K,
        init: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(slots.entry(key).or_default())
        };
        // A poisoned slot is one whose `init` panicked: it still holds `None`, so retry.
        let mut value = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = &*value {
            return Ok(v.clone());
        }
        let v = init()?;
        *value = Some(v.clone());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Barrier, mpsc};
    use std::thread;
    use std::time::Duration;

    use super::*;

    #[test]
    fn same_key_from_two_threads_initialises_once() {
        let map = OnceMap::<&str, usize>::default();
        let calls = AtomicUsize::new(0);
        let start = Barrier::new(2);
        let results: Vec<usize> = thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        map.get_or_try_init("k", || {
                            // Slow enough that the other thread arrives while this runs.
                            thread::sleep(Duration::from_millis(50));
                            Ok::<_, ()>(calls.fetch_add(1, Ordering::SeqCst) + 7)
                        })
                        .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(results, vec![7, 7]);
    }

    #[test]
    fn a_slow_entry_does_not_block_other_keys() {
        let map = OnceMap::<&str, u32>::default();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let map = &map;
        thread::scope(|s| {
            let slow = s.spawn(move || {
                map.get_or_try_init("slow", || {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok::<_, ()>(1)
                })
            });
            started_rx.recv().unwrap();
            // "slow" is mid-init and holds its slot: another key must still go through.
            assert_eq!(map.get_or_try_init("fast", || Ok::<_, ()>(2)), Ok(2));
            release_tx.send(()).unwrap();
            assert_eq!(slow.join().unwrap(), Ok(1));
        });
        assert_eq!(map.get_or_try_init("slow", || Ok::<_, ()>(99)), Ok(1));
    }

    #[test]
    fn a_failed_init_is_retried() {
        let map = OnceMap::<u8, u8>::default();
        assert_eq!(map.get_or_try_init(0, || Err("no")), Err("no"));
        assert_eq!(map.get_or_try_init(0, || Ok::<_, &str>(5)), Ok(5));
        assert_eq!(map.get_or_try_init(0, || Err("not called")), Ok(5));
    }
}
