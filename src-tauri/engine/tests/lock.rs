//! One engine per data folder, in a test binary of its own.
//!
//! The lock is `flock`'s, held by an open file description: a process forked while the lock is
//! open holds a copy until it calls exec, so another test starting a program at that moment
//! would keep the folder locked a moment after the lock was dropped. Here nothing else runs.

use wattbar_engine::home::lock::EngineLock;
use wattbar_engine::Error;

#[test]
fn a_second_engine_on_the_same_folder_is_told_who_holds_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let first = EngineLock::acquire(dir.path(), Some("127.0.0.1:9471"));
    assert!(first.is_ok(), "{first:?}");
    match EngineLock::acquire(dir.path(), None) {
        Err(Error::Locked { pid, api, .. }) => {
            assert_eq!(pid, Some(std::process::id()));
            assert_eq!(api.as_deref(), Some("127.0.0.1:9471"));
        }
        other => panic!("a second lock was given: {other:?}"),
    }
    assert_eq!(
        EngineLock::holder(dir.path()).and_then(|h| h.api),
        Some("127.0.0.1:9471".to_string())
    );
    drop(first);
    assert_eq!(EngineLock::holder(dir.path()), None);
    assert!(EngineLock::acquire(dir.path(), None).is_ok());
}

#[test]
fn an_engine_starting_while_a_window_asks_who_holds_the_folder_is_not_turned_away() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().to_path_buf();
    // Made once, as a first start leaves it.
    drop(EngineLock::acquire(&path, None));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asking = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = EngineLock::holder(&path);
            }
        })
    };
    for i in 0..200 {
        let lock = EngineLock::acquire(&path, None);
        assert!(lock.is_ok(), "start {i}: {lock:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = asking.join();
}
