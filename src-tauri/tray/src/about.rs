//! The menu's About line: which Wattbar this is and, when the preference `update_manifest_url`
//! is set, whether a newer release exists and how to update (apt, dnf, brew, a source build).
//! The check reads a signed manifest (`wattbar_release::update`) at start, when the URL changes
//! and once a day, and after a failure again within minutes; nothing is downloaded or replaced.

use std::time::{Duration, Instant};
use wattbar_release::update::{self, Verdict};

/// How often the manifest is asked again while its URL stays the same.
pub const CHECK_EVERY: Duration = Duration::from_secs(24 * 60 * 60);
/// After a failed check, the first retry; each failure after doubles it, up to [`CHECK_EVERY`].
pub const RETRY_FIRST: Duration = Duration::from_secs(5 * 60);

/// The result of one check, or why there is none.
pub type Checked = Result<Verdict, String>;

/// The About line's state: the URL followed, when it was last asked, and the last answer.
#[derive(Default)]
pub struct About {
    url: Option<String>,
    asked_at: Option<Instant>,
    in_flight: bool,
    answer: Option<Checked>,
    /// Checks failed in a row.
    failures: u32,
}

impl About {
    /// The URL to ask now, if a check is due: the preference changed, a day has passed, or after
    /// a failure 5 minutes, then 10, 20… up to a day.
    pub fn due(&mut self, url: Option<&str>, now: Instant) -> Option<String> {
        if url != self.url.as_deref() {
            self.url = url.map(str::to_owned);
            self.asked_at = None;
            self.answer = None;
            self.failures = 0;
        }
        let url = self.url.clone()?;
        let wait = match self.failures {
            0 => CHECK_EVERY,
            n => RETRY_FIRST
                .saturating_mul(1 << (n - 1).min(16))
                .min(CHECK_EVERY),
        };
        let stale = self
            .asked_at
            .is_none_or(|at| now.duration_since(at) >= wait);
        if self.in_flight || !stale {
            return None;
        }
        self.in_flight = true;
        self.asked_at = Some(now);
        Some(url)
    }

    /// Takes the answer to a check of `url`; one for a URL no longer followed is dropped.
    pub fn answered(&mut self, url: &str, answer: Checked) {
        if self.url.as_deref() == Some(url) {
            self.in_flight = false;
            self.failures = match answer {
                Ok(_) => 0,
                Err(_) => self.failures.saturating_add(1),
            };
            self.answer = Some(answer);
        }
    }

    /// The line the menu shows.
    pub fn line(&self, how_to_update: &str) -> String {
        line(self.answer.as_ref(), how_to_update)
    }
}

/// Asks `url` and compares with this program's version (blocking: run it off the loop). The
/// newest version seen is kept in the data folder, so that an older manifest replayed later is
/// refused.
pub fn check(url: &str) -> Checked {
    let keys = wattbar_release::trusted_keys();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let seen_file = wattbar_engine::home::paths::data_dir()
        .map(|d| d.join(update::SEEN_FILE))
        .ok();
    let seen = seen_file.as_deref().and_then(update::seen);
    let latest = update::fetch(url, &keys, wattbar_engine::unix_now(), seen.as_deref())
        .map_err(|e| e.to_string())?;
    if let Some(file) = &seen_file {
        if let Err(e) = update::remember(file, &latest) {
            tracing::warn!("cannot keep the version seen in {}: {e}", file.display());
        }
    }
    update::compare(wattbar_release::VERSION, latest).map_err(|e| e.to_string())
}

fn line(answer: Option<&Checked>, how_to_update: &str) -> String {
    let this = wattbar_release::VERSION;
    match answer {
        None => format!("Wattbar {}", wattbar_release::LONG_VERSION),
        Some(Ok(Verdict::UpToDate { .. })) => format!("Wattbar {this}: up to date"),
        Some(Ok(Verdict::Newer { latest })) => format!(
            "Wattbar {} is out (this is {this}): {how_to_update}",
            latest.version
        ),
        Some(Err(why)) => {
            let why: String = why.chars().take(80).collect();
            format!("Wattbar {this} (update check failed: {why})")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_release::update::Manifest;

    fn manifest(v: &str) -> Manifest {
        Manifest {
            version: v.into(),
            released: None,
            notes: None,
            expires: None,
        }
    }

    #[test]
    fn a_check_is_due_at_start_on_a_new_url_and_a_day_later_never_twice_at_once() {
        let t0 = Instant::now();
        let mut about = About::default();
        assert_eq!(about.due(None, t0), None);
        assert_eq!(
            about.due(Some("https://a/m.json"), t0).as_deref(),
            Some("https://a/m.json")
        );
        // In flight: not again.
        assert_eq!(about.due(Some("https://a/m.json"), t0 + CHECK_EVERY), None);
        about.answered(
            "https://a/m.json",
            Ok(Verdict::UpToDate {
                latest: manifest("0.1.0"),
            }),
        );
        assert_eq!(
            about.due(Some("https://a/m.json"), t0 + Duration::from_secs(3600)),
            None
        );
        assert!(about
            .due(Some("https://a/m.json"), t0 + CHECK_EVERY)
            .is_some());
        about.answered("https://a/m.json", Err("down".into()));
        // A new URL is asked at once, and the old one's late answer is dropped.
        assert!(about
            .due(Some("https://b/m.json"), t0 + CHECK_EVERY)
            .is_some());
        about.answered(
            "https://a/m.json",
            Ok(Verdict::Newer {
                latest: manifest("9.0.0"),
            }),
        );
        assert_eq!(
            about.line("x"),
            format!("Wattbar {}", wattbar_release::LONG_VERSION)
        );
        // Turned off: the line goes back to the version alone.
        assert_eq!(about.due(None, t0 + CHECK_EVERY * 2), None);
        assert_eq!(
            about.line("x"),
            format!("Wattbar {}", wattbar_release::LONG_VERSION)
        );
    }

    #[test]
    fn the_line_says_which_release_is_out_and_how_to_update() {
        let newer = Ok(Verdict::Newer {
            latest: manifest("0.2.0"),
        });
        assert_eq!(
            line(Some(&newer), "brew upgrade wattbar"),
            format!(
                "Wattbar 0.2.0 is out (this is {}): brew upgrade wattbar",
                wattbar_release::VERSION
            )
        );
        let failed: Checked = Err("x".repeat(200));
        assert!(line(Some(&failed), "").len() < 140);
    }

    #[test]
    fn a_failed_check_is_tried_again_in_minutes_then_less_often_up_to_a_day() {
        let t0 = Instant::now();
        let url = "https://a/m.json";
        let mut about = About::default();
        assert!(about.due(Some(url), t0).is_some());
        about.answered(url, Err("down".into()));
        // 5 minutes, then 10: not a day.
        assert_eq!(about.due(Some(url), t0 + Duration::from_secs(299)), None);
        let t1 = t0 + RETRY_FIRST;
        assert!(about.due(Some(url), t1).is_some());
        about.answered(url, Err("down".into()));
        assert_eq!(about.due(Some(url), t1 + Duration::from_secs(599)), None);
        let t2 = t1 + RETRY_FIRST * 2;
        assert!(about.due(Some(url), t2).is_some());
        // Answered: a day again.
        about.answered(
            url,
            Ok(Verdict::UpToDate {
                latest: manifest("0.1.0"),
            }),
        );
        assert_eq!(about.due(Some(url), t2 + RETRY_FIRST * 8), None);
        assert!(about.due(Some(url), t2 + CHECK_EVERY).is_some());
    }
}
