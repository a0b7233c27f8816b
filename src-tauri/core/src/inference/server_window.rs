//! Tokens per window from a model server's own counters (`/metrics`), with no proxy.
//!
//! Rules:
//! - A window's tokens for a model are the differences of the server's counters between the
//!   scrape that opens the window and the one that closes it. One scrape serves both windows it
//!   separates, so a server is read once per window.
//! - A counter lower than before means the server restarted: the window across the restart is
//!   not counted (its tokens are unknown, never guessed), and the later scrape is the next
//!   window's baseline. A counter seen at one end only is unknown for that window too.
//! - A window is `concurrent` when the server ran more than one request at either scrape, and
//!   `coarse` when its tokens land only when a request ends (llama.cpp, TGI) and a request was
//!   running at either end: part of the window's tokens belong to another.

/// One model's counters at one scrape, as the server exposes them; `None` where it does not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCounters {
    /// Prompt tokens processed since the server started.
    pub prompt_tokens: Option<f64>,
    /// Tokens generated since the server started.
    pub completion_tokens: Option<f64>,
    /// Requests running at the scrape.
    pub running: Option<f64>,
    /// GPU seconds spent on prefill and on decode since the server started (SGLang).
    pub prefill_gpu_seconds: Option<f64>,
    pub decode_gpu_seconds: Option<f64>,
}

/// When a server's token counters move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// During a request, each step (vLLM, SGLang).
    AsGenerated,
    /// When a request ends (llama.cpp, TGI).
    AtRequestEnd,
}

/// One model's tokens over one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowTokens {
    pub prompt_tokens: Option<f64>,
    pub completion_tokens: Option<f64>,
    pub prefill_gpu_seconds: Option<f64>,
    pub decode_gpu_seconds: Option<f64>,
    /// More than one request ran at either end.
    pub concurrent: bool,
    /// Tokens land at request end and a request ran across an end of the window.
    pub coarse: bool,
}

/// Why a window has no tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncounted {
    /// A counter went back: the server restarted within the window.
    Restarted,
}

/// The change of one counter over a window: `Err` when it went back.
fn change(before: Option<f64>, after: Option<f64>) -> Result<Option<f64>, Uncounted> {
    match (before, after) {
        (Some(b), Some(a)) if a < b => Err(Uncounted::Restarted),
        (Some(b), Some(a)) => Ok(Some(a - b)),
        _ => Ok(None),
    }
}

/// A model's tokens between the scrapes `before` and `after`.
pub fn window_tokens(
    before: &ServerCounters,
    after: &ServerCounters,
    counting: Counting,
) -> Result<WindowTokens, Uncounted> {
    let running = [before.running, after.running];
    let most = running.iter().flatten().fold(0.0_f64, |m, r| m.max(*r));
    let any_running = running.iter().flatten().any(|r| *r > 0.0);
    Ok(WindowTokens {
        prompt_tokens: change(before.prompt_tokens, after.prompt_tokens)?,
        completion_tokens: change(before.completion_tokens, after.completion_tokens)?,
        prefill_gpu_seconds: change(before.prefill_gpu_seconds, after.prefill_gpu_seconds)?,
        decode_gpu_seconds: change(before.decode_gpu_seconds, after.decode_gpu_seconds)?,
        concurrent: most > 1.0,
        coarse: counting == Counting::AtRequestEnd && any_running,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(prompt: f64, completion: f64, running: f64) -> ServerCounters {
        ServerCounters {
            prompt_tokens: Some(prompt),
            completion_tokens: Some(completion),
            running: Some(running),
            ..ServerCounters::default()
        }
    }

    #[test]
    fn a_window_counts_the_differences_of_its_two_scrapes() {
        // 5 prompt and 7 generated tokens at the first scrape; 25 and 107 at the next.
        let w = window_tokens(
            &at(5.0, 7.0, 0.0),
            &at(25.0, 107.0, 1.0),
            Counting::AsGenerated,
        );
        assert_eq!(
            w,
            Ok(WindowTokens {
                prompt_tokens: Some(20.0),
                completion_tokens: Some(100.0),
                ..WindowTokens::default()
            })
        );
    }

    #[test]
    fn a_counter_that_goes_back_is_a_restart_and_the_window_is_not_counted() {
        let restarted = window_tokens(
            &at(6886.0, 3469.0, 0.0),
            &at(12.0, 40.0, 0.0),
            Counting::AtRequestEnd,
        );
        assert_eq!(restarted, Err(Uncounted::Restarted));
        // The later scrape is the next baseline: the window after it counts again.
        let next = window_tokens(
            &at(12.0, 40.0, 0.0),
            &at(30.0, 90.0, 0.0),
            Counting::AtRequestEnd,
        );
        assert_eq!(next.map(|w| w.completion_tokens), Ok(Some(50.0)));
    }

    #[test]
    fn a_counter_seen_at_one_end_only_is_unknown_never_the_whole_total() {
        let appeared = ServerCounters::default();
        let w = window_tokens(
            &appeared,
            &at(8_128_902.0, 7_557_572.0, 162.0),
            Counting::AsGenerated,
        );
        assert_eq!(w.as_ref().map(|w| w.completion_tokens), Ok(None));
        assert_eq!(w.map(|w| w.concurrent), Ok(true));
    }

    #[test]
    fn tokens_counted_at_request_end_with_a_request_running_are_coarse() {
        let w = window_tokens(
            &at(0.0, 0.0, 1.0),
            &at(10.0, 20.0, 0.0),
            Counting::AtRequestEnd,
        );
        assert_eq!(w.map(|w| (w.coarse, w.concurrent)), Ok((true, false)));
        let w = window_tokens(
            &at(0.0, 0.0, 1.0),
            &at(10.0, 20.0, 1.0),
            Counting::AsGenerated,
        );
        assert_eq!(w.map(|w| w.coarse), Ok(false));
    }
}
