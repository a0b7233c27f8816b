//! The tray's one deciding thread: it follows the engine's published state and its low-power
//! events, takes the clicks the event loop passes on, decides what the tray shows and posts the
//! notifications. The event loop only draws what it is sent.
//!
//! Rules:
//! - One owner: the display's deadbands, what was notified and the click in progress live here
//!   alone, so what the tray shows follows the published states in order and never goes back to
//!   an older one.
//! - Low-power notifications come from the engine's stream of events, one per event, never from
//!   sampling the state: a switch and the unload it causes are two notifications.
//! - A state is looked at when the engine publishes one, at most once per [`REFRESH_PERIOD`]
//!   (the latest each time: one sooner waits out the period); nothing wakes the tray between
//!   states, so a resting engine's five seconds are five seconds here too. A click's result is
//!   shown as soon as the engine has published it, whatever the deadbands.

use crate::about::{self, About, Checked};
use crate::display::{Display, Shown};
use crate::menu::MenuId;
use crate::{autostart, notify, windows};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};
use wattbar_engine::stages::low_power::LowPowerEvent;
use wattbar_engine::{Command, EngineHandle, PublishedState};

/// The tray refreshes at most this often.
pub const REFRESH_PERIOD: Duration = Duration::from_secs(1);
/// How long a click waits for the engine to publish what it asked for.
const CLICK_TAKEN_WITHIN: Duration = Duration::from_secs(2);

/// What the event loop tells the deciding thread.
#[derive(Debug)]
pub enum Told {
    /// The tray icon exists: show the state now.
    Built,
    /// The tray could not show the last state: the next is shown whole.
    NotShown,
    Clicked(MenuId),
}

/// Whether a published state shows what a click asked for.
type Taken = Box<dyn Fn(&PublishedState) -> bool + Send + Sync>;

/// Decides until the engine or the event loop goes away; `show` hands each decision to the event
/// loop, and `show_about` each new About line; both answer false once it is gone.
pub async fn run(
    engine: Arc<EngineHandle>,
    mut events: broadcast::Receiver<LowPowerEvent>,
    mut told: mpsc::UnboundedReceiver<Told>,
    show: impl Fn(Shown) -> bool,
    show_about: impl Fn(String) -> bool,
) {
    let mut published = engine.subscribe();
    let mut display = Display::default();
    let mut follower = Follower::new(&published.borrow_and_update());
    // When a state was last looked at, and whether a newer one waits out the period since.
    let mut looked_at: Option<tokio::time::Instant> = None;
    let mut held = false;
    let mut built = false;
    let mut events_open = true;
    // The click in progress: what shows it taken, and until when to wait.
    let mut waiting: Option<(Taken, tokio::time::Instant)> = None;
    // The About line: release checks run off this thread and answer here.
    let mut releases = About::default();
    let (answer, mut answers) = mpsc::unbounded_channel::<(String, Checked, String)>();
    let mut how_to_update = String::new();
    let mut about_shown = String::new();
    loop {
        let deadline = waiting.as_ref().map(|(_, d)| *d);
        let next_look = looked_at.map(|t| t + REFRESH_PERIOD);
        // A state to look at, and whether it must be shown whatever the deadbands.
        let look: Option<bool> = tokio::select! {
            changed = published.changed(), if !held || waiting.is_some() => match changed {
                Ok(()) if waiting.is_some()
                    || next_look.is_none_or(|t| t <= tokio::time::Instant::now()) =>
                {
                    Some(false)
                }
                Ok(()) => {
                    held = true;
                    None
                }
                Err(_) => return,
            },
            () = sleep_until(next_look), if held => Some(false),
            () = sleep_until(deadline), if deadline.is_some() => {
                waiting = None;
                Some(true)
            }
            event = events.recv(), if events_open => {
                match event {
                    Ok((_, message)) => notify::low_power(&message),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!("{n} low-power notifications were missed");
                    }
                    Err(broadcast::error::RecvError::Closed) => events_open = false,
                }
                None
            }
            Some((url, checked, how)) = answers.recv() => {
                releases.answered(&url, checked);
                how_to_update = how;
                None
            }
            message = told.recv() => match message {
                None => return,
                Some(Told::Built) => {
                    built = true;
                    Some(true)
                }
                Some(Told::NotShown) => {
                    display.forget();
                    None
                }
                Some(Told::Clicked(id)) => {
                    if let Some(taken) = clicked(&engine, id) {
                        waiting = Some((taken, tokio::time::Instant::now() + CLICK_TAKEN_WITHIN));
                    }
                    None
                }
            },
        };
        let line = releases.line(&how_to_update);
        if built && line != about_shown {
            if !show_about(line.clone()) {
                return;
            }
            about_shown = line;
        }
        let Some(mut forced) = look else { continue };
        held = false;
        looked_at = Some(tokio::time::Instant::now());
        let p = Arc::clone(&published.borrow_and_update());
        follower.follow(&p);
        if let Some(url) = releases.due(p.prefs.update_manifest_url.as_deref(), Instant::now()) {
            let answer = answer.clone();
            tokio::task::spawn_blocking(move || {
                let checked = about::check(&url);
                let exe = std::env::current_exe().unwrap_or_default();
                let how = wattbar_release::update::how_to_update(&exe);
                let _ = answer.send((url, checked, how));
            });
        }
        if waiting.take_if(|(taken, _)| taken(&p)).is_some() {
            forced = true;
        }
        if !built {
            continue;
        }
        if let Some(next) = display.next(&p, Instant::now(), forced) {
            if !show(next) {
                return;
            }
        }
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// What the tray does beside drawing, following the engine's published state: one notification
/// per budget alert and per notice, and the launch-at-login entry.
struct Follower {
    alerts_seen: u64,
    /// Whether the price in force was above `price_notify_above` at the last state.
    price_above: bool,
    notice_seen: Option<String>,
    entry: autostart::Entry,
}

impl Follower {
    /// Every budget alert of this run is news; a notice the engine started with is said once.
    fn new(_at_start: &PublishedState) -> Follower {
        Follower {
            alerts_seen: 0,
            price_above: false,
            notice_seen: None,
            entry: autostart::Entry::default(),
        }
    }

    fn follow(&mut self, published: &PublishedState) {
        if published.kept.alert_seq > self.alerts_seen {
            self.alerts_seen = published.kept.alert_seq;
            notify::budget(&published.kept.alerts);
        }
        let (above, said) = crate::format::price_alert(self.price_above, published);
        self.price_above = above;
        if let Some(message) = said {
            notify::price(&message);
        }
        if published.kept.notice != self.notice_seen {
            self.notice_seen.clone_from(&published.kept.notice);
            if let Some(message) = &published.kept.notice {
                notify::notice(message);
            }
        }
        // Only a change touches the system's entry (a file).
        if let Err(message) = self.entry.follow(published.prefs.launch_at_login) {
            tracing::warn!("{message}");
        }
    }
}

/// Asks for what a click on an item asks for; for a change of the engine's state, returns how
/// to recognise the state that shows it.
fn clicked(engine: &EngineHandle, id: MenuId) -> Option<Taken> {
    let (sent, taken): (_, Taken) = match id {
        MenuId::LowPower => {
            let on = !engine.current().low_power.state.enabled;
            (
                engine.send(Command::SetLowPower(on)),
                Box::new(move |p| p.low_power.state.enabled == on),
            )
        }
        MenuId::ResetSession => {
            let before = engine.current().energy.session.started_unix;
            (
                engine.send(Command::ResetSession),
                Box::new(move |p| p.energy.session.started_unix != before),
            )
        }
        MenuId::OpenDashboard => {
            crate::report(windows::open(windows::Window::Dashboard));
            return None;
        }
        MenuId::Preferences => {
            crate::report(windows::open(windows::Window::Preferences));
            return None;
        }
        MenuId::Now
        | MenuId::Session
        | MenuId::Today
        | MenuId::LastAnswer
        | MenuId::Top
        | MenuId::Cheapest
        | MenuId::Battery
        | MenuId::About
        | MenuId::Quit => return None,
    };
    match sent {
        Ok(()) => Some(taken),
        Err(e) => {
            tracing::warn!("the engine did not take the click: {e}");
            None
        }
    }
}
