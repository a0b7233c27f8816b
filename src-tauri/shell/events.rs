//! The contract with the UI: the event name and payloads here, the command names in `lib.rs`'s
//! `generate_handler!`. `ui/js/contract.js` mirrors both; tests keep them in step.

/// Emitted to the dashboard with each state the engine publishes (`wattbar_serve::view::
/// StatePayload`, as `/v1/stream` carries it), only while the window is shown.
pub const STATE_CHANGED: &str = "wattbar:state";

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands `lib.rs` registers with `generate_handler!`.
    fn registered() -> Vec<String> {
        let lib = include_str!("lib.rs");
        let start = lib
            .find("generate_handler![")
            .unwrap_or_else(|| panic!("no generate_handler! in lib.rs"));
        let list = &lib[start + "generate_handler![".len()..];
        let end = list
            .find(']')
            .unwrap_or_else(|| panic!("unclosed generate_handler!"));
        list[..end]
            .split(',')
            .map(|n| n.trim().trim_start_matches("commands::").to_string())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// The command names `ui/js/contract.js` exports as `CMD_*`.
    fn invoked() -> Vec<String> {
        include_str!("../../ui/js/contract.js")
            .lines()
            .filter(|l| l.starts_with("export const CMD_"))
            .filter_map(|l| l.split('"').nth(1).map(str::to_string))
            .collect()
    }

    #[test]
    fn the_ui_invokes_exactly_the_commands_the_app_registers() {
        let mut registered = registered();
        let mut invoked = invoked();
        registered.sort();
        invoked.sort();
        assert!(registered.len() >= 8, "{registered:?}");
        assert_eq!(invoked, registered);
    }

    #[test]
    fn the_ui_listens_to_the_event_the_app_emits() {
        let line = format!("export const STATE_CHANGED = \"{STATE_CHANGED}\";");
        assert!(
            include_str!("../../ui/js/contract.js").contains(&line),
            "ui/js/contract.js lacks {line}"
        );
    }
}
