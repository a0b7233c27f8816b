//! Tray menu ids. The menu is built once; its lines are updated in place.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MenuId {
    /// Disabled line: watts, source and quality.
    Now,
    /// Disabled line: session kWh and cost.
    Session,
    /// Disabled line: today's kWh and cost.
    Today,
    /// Disabled line: the last inference request's energy and J/token.
    LastAnswer,
    /// Disabled line: the program drawing the most watts.
    Top,
    /// Disabled line, with a price feed only: the cheapest two hours ahead.
    Cheapest,
    /// Disabled line, with a battery only: its health and cycles.
    Battery,
    LowPower,
    ResetSession,
    OpenDashboard,
    Preferences,
    /// Disabled line: the version, and whether a newer release exists.
    About,
    Quit,
}

impl MenuId {
    pub const ALL: [MenuId; 13] = [
        MenuId::Now,
        MenuId::Session,
        MenuId::Today,
        MenuId::LastAnswer,
        MenuId::Top,
        MenuId::Cheapest,
        MenuId::Battery,
        MenuId::LowPower,
        MenuId::ResetSession,
        MenuId::OpenDashboard,
        MenuId::Preferences,
        MenuId::About,
        MenuId::Quit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MenuId::Now => "now",
            MenuId::Session => "session",
            MenuId::Today => "today",
            MenuId::LastAnswer => "last-answer",
            MenuId::Top => "top",
            MenuId::Cheapest => "cheapest",
            MenuId::Battery => "battery",
            MenuId::LowPower => "low-power",
            MenuId::ResetSession => "reset-session",
            MenuId::OpenDashboard => "open-dashboard",
            MenuId::Preferences => "preferences",
            MenuId::About => "about",
            MenuId::Quit => "quit",
        }
    }

    pub fn parse(id: &str) -> Option<MenuId> {
        MenuId::ALL.into_iter().find(|m| m.as_str() == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_menu_id_round_trips() {
        for id in MenuId::ALL {
            assert_eq!(MenuId::parse(id.as_str()), Some(id));
        }
        assert_eq!(MenuId::parse("nope"), None);
    }
}
