// Mirror of src-tauri/shell/events.rs: event and command names shared with the app.
export const STATE_CHANGED = "wattbar:state";
export const CMD_GET_DASHBOARD = "get_dashboard";
export const CMD_SET_PRICE = "set_price";
export const CMD_SET_LOW_POWER = "set_low_power";
export const CMD_RESET_SESSION = "reset_session";
export const CMD_GET_HISTORY = "get_history";
export const CMD_GET_BATTERY = "get_battery";
export const CMD_SAVE_REPORT = "save_report";
export const CMD_GET_PREFERENCES = "get_preferences";
export const CMD_SET_PREFERENCE = "set_preference";
export const CMD_OPEN_PREFERENCES = "open_preferences";
export const CMD_GET_KEYS = "get_keys";
export const CMD_ADD_KEY = "add_key";
export const CMD_REMOVE_KEY = "remove_key";
export const CMD_ROTATE_KEY = "rotate_key";
