//! The book: records settled from intervals, external windows, the baseline and the view.

use super::*;

fn stamp(s: f64) -> Stamp {
    Stamp::new(Duration::from_secs_f64(s), 1.7e9 + s)
}

/// The one-second interval starting at `t`, at `watts`, measured by RAPL.
fn second(t: f64, watts: f64) -> Interval {
    Interval {
        start: t,
        end: t + 1.0,
        unix_start: 1.7e9 + t,
        unix_end: 1.7e9 + t + 1.0,
        joules: Some(watts),
        by_domain: Vec::new(),
        quality: Some(wattbar_core::Quality::Measured),
        source: Some("rapl".into()),
        method: Some(wattbar_core::meter::Method::Counter),
        answered: None,
        coverage: Some(wattbar_core::Coverage::of_domain(
            wattbar_core::Domain::Cpu,
            None,
        )),
    }
}

/// One-second intervals at `watts` from 0 to `seconds`.
fn book_at(watts: f64, seconds: usize) -> Book {
    let mut book = Book::new(StoredBook::default(), 5.0);
    for k in 0..seconds {
        book.push_interval(second(k as f64, watts), &[]);
    }
    book
}

/// A request that ran `start` → `end`, with an id of its own.
fn finished(model: &str, start: f64, end: f64) -> Finished {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    Finished {
        record_id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        route: Route::OllamaGenerate,
        model: Some(model.into()),
        requested_model: None,
        remote: is_remote_model(model),
        status: Status::Ok,
        error: None,
        start: stamp(start),
        first_token: None,
        end: stamp(end),
        figures: ServerFigures {
            completion_tokens: Some(100),
            finished: true,
            ..ServerFigures::default()
        },
        urgent: false,
    }
}

#[test]
fn two_overlapping_requests_settled_apart_add_up_to_their_union() {
    // 200 W. A runs 1 → 6 s and ends while B (4 → 9 s) is still in flight.
    let mut book = book_at(200.0, 10);
    let b_open = Open {
        start: stamp(4.0),
        first_token: None,
        remote: false,
        end: None,
    };
    let a = book.settle(vec![finished("llama3", 1.0, 6.0)], &[b_open]);
    let b = book.settle(vec![finished("llama3", 4.0, 9.0)], &[]);
    let (a, b) = (a[0].energy_joules, b[0].energy_joules);
    // A alone 3 s (600 J) + shared 2 s (400 J / 2); B the same.
    assert_eq!(a, Some(800.0));
    assert_eq!(b, Some(800.0));
    // The union is 8 s × 200 W = 1600 J; each window on its own would say 1000 J.
    assert_eq!(a.unwrap_or(0.0) + b.unwrap_or(0.0), 1600.0);
    assert_eq!(book.view().models[0].requests, 2);
}

#[test]
fn a_neighbour_that_ended_but_waits_for_its_sample_still_halves_the_overlap() {
    // 200 W. A runs 1 → 6 s; B 4 → 6.5 s ended too, after the sample that settles A.
    let mut book = book_at(200.0, 10);
    let b_ended = Open {
        start: stamp(4.0),
        first_token: None,
        remote: false,
        end: Some(stamp(6.5)),
    };
    let a = book.settle(vec![finished("llama3", 1.0, 6.0)], &[b_ended]);
    let b = book.settle(vec![finished("llama3", 4.0, 6.5)], &[]);
    let (a, b) = (a[0].energy_joules, b[0].energy_joules);
    // A: 3 s alone (600 J) + 2 s shared (200 J); B: 2 s shared (200 J) + 0.5 s alone (100 J).
    assert_eq!(a, Some(800.0));
    assert_eq!(b, Some(300.0));
    // The union, 5.5 s × 200 W; with B unseen when A settled, A would have had 1000 J.
    assert_eq!(a.unwrap_or(0.0) + b.unwrap_or(0.0), 1100.0);
}

#[test]
fn a_cloud_request_takes_no_energy_and_leaves_its_neighbours_whole() {
    let mut book = book_at(100.0, 4);
    let made = book.settle(
        vec![
            finished("gpt-oss:120b-cloud", 0.0, 4.0),
            finished("llama3", 0.0, 4.0),
        ],
        &[],
    );
    assert_eq!(made[0].status, Status::Remote);
    assert_eq!(made[0].energy_joules, None);
    assert_eq!(made[1].energy_joules, Some(400.0));
}

#[test]
fn the_baseline_comes_from_idle_intervals_and_nets_the_records() {
    // 12 idle seconds at 30 W, a request at 130 W for 2 s.
    let mut book = Book::new(StoredBook::default(), 5.0);
    for (k, w) in [30.0; 12].into_iter().chain([130.0, 130.0]).enumerate() {
        book.push_interval(second(k as f64, w), &[]);
        // Baselines are taken every 30 s: take one after the idle part.
        if k == 11 {
            book.baseline_taken = None;
        }
    }
    assert_eq!(book.take_baseline_change().map(|b| b.watts), Some(30.0));
    let r = book.settle(vec![finished("llama3", 12.0, 14.0)], &[]);
    // 260 J gross − 30 W × 2 s = 200 J net.
    assert_eq!(r[0].energy_joules, Some(260.0));
    assert_eq!(r[0].net_energy_joules, Some(200.0));
}

/// The idle draw was taken at the wall (a plug, 60 W); the plug is unplugged and a request is
/// measured on the CPU package alone (130 W × 2 s = 260 J). 60 W of the wall is no part of the
/// package's joules: the record has its gross energy, in its own scope, and no net figure.
#[test]
fn an_idle_draw_taken_at_the_wall_nets_nothing_measured_on_the_package() {
    use wattbar_core::{Coverage, Domain, Scope};
    let mut book = Book::new(StoredBook::default(), 5.0);
    for k in 0..12 {
        let at_the_wall = Interval {
            coverage: Some(Coverage::of_domain(Domain::Wall, None)),
            ..second(k as f64, 60.0)
        };
        // Baselines are taken every 30 s: take one after the idle part.
        if k == 11 {
            book.baseline_taken = None;
        }
        book.push_interval(at_the_wall, &[]);
    }
    assert_eq!(book.take_baseline_change().map(|b| b.watts), Some(60.0));
    book.push_interval(second(12.0, 130.0), &[]);
    book.push_interval(second(13.0, 130.0), &[]);
    let r = book.settle(vec![finished("llama3", 12.0, 14.0)], &[]);
    assert_eq!(r[0].energy_joules, Some(260.0));
    assert_eq!(r[0].net_energy_joules, None);
    assert_eq!(r[0].baseline_watts, None);
    assert_eq!(r[0].scope, Some(Scope::Components));
    assert_eq!(r[0].covers, vec!["cpu-package".to_string()]);
}

/// Work a client measured itself: 100 tokens at 20 tok/s, the 5 s ending at `end` (elapsed).
fn posted(book: &mut Book, end: f64, now: f64) -> Record {
    let e = External {
        model: "llama3".into(),
        prompt_tokens: None,
        completion_tokens: 100,
        start: 1.7e9 + end - 5.0,
        end: 1.7e9 + end,
        tokens_per_second: Some(20.0),
    };
    book.external(e, 1, stamp(now), &[])
        .unwrap_or_else(|| panic!("a record for the window ending at {end}"))
}

#[test]
fn records_posted_apart_never_hold_more_than_was_drawn_and_say_what_they_share() {
    // 50 W. Four clients post 5 s windows ending at 10, 10.5, 11 and 11.5 s, each as it ends:
    // their union, 6.5 s, drew 325 J. The first, alone when it came, keeps its 250 J; each later
    // one gets only the half second no record held before (25 J) and says that 225 J of its
    // window was already held, shared by up to 2, 3 and 4 records.
    let mut book = book_at(50.0, 20);
    let made: Vec<Record> = [10.0, 10.5, 11.0, 11.5]
        .iter()
        .map(|&end| posted(&mut book, end, end))
        .collect();
    let energy: Vec<f64> = made.iter().filter_map(|r| r.energy_joules).collect();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(
        energy
            .iter()
            .zip([250.0, 25.0, 25.0, 25.0])
            .all(|(a, b)| close(*a, b)),
        "{energy:?}"
    );
    let held: Vec<f64> = made.iter().filter_map(|r| r.held_before_joules).collect();
    assert!(
        held.iter()
            .zip([0.0, 225.0, 225.0, 225.0])
            .all(|(a, b)| close(*a, b)),
        "{held:?}"
    );
    let shared: Vec<Option<u64>> = made.iter().map(|r| r.shared_by).collect();
    assert_eq!(shared, [Some(1), Some(2), Some(3), Some(4)]);
    // The first record, returned already, is what it was.
    assert_eq!(made[0].energy_joules, Some(250.0));
}

#[test]
fn in_whatever_order_records_arrive_they_add_up_to_the_energy_of_their_union() {
    // The same four windows posted in each of the 24 orders: always 325 J in all.
    let ends = [10.0, 10.5, 11.0, 11.5];
    let mut orders = vec![vec![]];
    for _ in 0..ends.len() {
        orders = orders
            .into_iter()
            .flat_map(|o: Vec<usize>| {
                (0..ends.len())
                    .filter(|i| !o.contains(i))
                    .map(|i| [o.clone(), vec![i]].concat())
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    assert_eq!(orders.len(), 24);
    for order in orders {
        let mut book = book_at(50.0, 20);
        let total: f64 = order
            .iter()
            .map(|&i| {
                posted(&mut book, ends[i], 12.0)
                    .energy_joules
                    .unwrap_or(0.0)
            })
            .sum();
        assert!(
            (total - 325.0).abs() < 1e-9,
            "{total} J posted in order {order:?}"
        );
    }
}
