//! Setting one stored preference at a time: each value checked as it is set, so a bad value
//! costs only itself and a preferences file a newer version wrote still loads.

use super::*;

impl Preferences {
    /// Sets one stored field after validating it. Unknown keys are ignored (a newer version may
    /// have written them); a refused value leaves the field as it was.
    pub fn set_field(&mut self, key: &str, value: &serde_json::Value) -> Result<(), Error> {
        fn wrong(field: &'static str, want: &str, value: &serde_json::Value) -> Error {
            Error::Invalid {
                field,
                message: format!("{value} is not {want}"),
            }
        }
        match key {
            "price_per_kwh" => {
                let v = value
                    .as_f64()
                    .ok_or_else(|| wrong("price", "a number", value))?;
                self.price_per_kwh = Price::new(v)?;
            }
            "currency" => {
                let v = value
                    .as_str()
                    .ok_or_else(|| wrong("currency", "a string", value))?;
                self.currency = Currency::parse(v)?;
            }
            k if POLICY_KEYS.contains(&k) => {
                let field = POLICY_KEYS
                    .iter()
                    .find(|f| **f == k)
                    .copied()
                    .unwrap_or("low_power");
                let mut all =
                    serde_json::to_value(&self.low_power).map_err(|e| Error::Invalid {
                        field,
                        message: e.to_string(),
                    })?;
                if let Some(map) = all.as_object_mut() {
                    map.insert(k.to_string(), value.clone());
                }
                let next: PolicyConfig =
                    serde_json::from_value(all).map_err(|_| wrong(field, kind_of(k), value))?;
                next.validate()?;
                self.low_power = next;
            }
            "title_above_w" => {
                self.title_above_w =
                    positive("title_above_w", optional_number("title_above_w", value)?)?;
            }
            "cost_in_menu_bar" | "launch_at_login" | "api_enabled" | "llm_proxy_enabled"
            | "find_model_servers" | "keys_required" | "budgets_count_wear" => {
                let field = match key {
                    "budgets_count_wear" => "budgets_count_wear",
                    "keys_required" => "keys_required",
                    "cost_in_menu_bar" => "cost_in_menu_bar",
                    "launch_at_login" => "launch_at_login",
                    "llm_proxy_enabled" => "llm_proxy_enabled",
                    "find_model_servers" => "find_model_servers",
                    _ => "api_enabled",
                };
                let v = value
                    .as_bool()
                    .ok_or_else(|| wrong(field, "true or false", value))?;
                match key {
                    "cost_in_menu_bar" => self.cost_in_menu_bar = v,
                    "launch_at_login" => self.launch_at_login = v,
                    "llm_proxy_enabled" => self.llm_proxy_enabled = v,
                    "find_model_servers" => self.find_model_servers = v,
                    "keys_required" => self.keys_required = v,
                    "budgets_count_wear" => self.budgets_count_wear = v,
                    _ => self.api_enabled = v,
                }
            }
            "llm_proxy_listen" => {
                let v = value
                    .as_str()
                    .ok_or_else(|| wrong("llm_proxy_listen", "a string", value))?
                    .trim();
                check_listen(v)?;
                self.llm_proxy_listen = v.to_string();
            }
            "llm_upstream" => {
                let v = match value {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) if s.trim().is_empty() => None,
                    serde_json::Value::String(s) => {
                        Some(s.trim().trim_end_matches('/').to_string())
                    }
                    _ => return Err(wrong("llm_upstream", "a string or null", value)),
                };
                check_upstream(v.as_deref())?;
                self.llm_upstream = v;
            }
            "wall_meter" => {
                self.wall_meter = WallMeterPref::parse(value, self.wall_meter.as_ref())?;
            }
            "mqtt" => {
                self.mqtt = MqttPref::parse(value, self.mqtt.as_ref())?;
            }
            "price_feed" => {
                self.price_feed = FeedPref::parse_price(value, self.price_feed.as_ref())?;
            }
            "carbon_feed" => {
                self.carbon_feed = FeedPref::parse_carbon(value, self.carbon_feed.as_ref())?;
            }
            "price_notify_above" => {
                let v = optional_number("price_notify_above", value)?;
                let max = crate::tariff::MAX_PRICE_PER_KWH;
                if let Some(p) = v.filter(|p| !(p.is_finite() && (-max..=max).contains(p))) {
                    return Err(Error::Invalid {
                        field: "price_notify_above",
                        message: format!("{p} per kWh is not a price of one kWh"),
                    });
                }
                self.price_notify_above = v;
            }
            "otlp" => {
                self.otlp = OtlpPref::parse(value, self.otlp.as_ref())?;
            }
            "server_metrics" => {
                self.server_metrics = ServerMetricsPref::parse(value, &self.server_metrics)?;
            }
            "update_manifest_url" => {
                let v = match value {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) if s.trim().is_empty() => None,
                    serde_json::Value::String(s) => Some(s.trim().to_string()),
                    _ => return Err(wrong("update_manifest_url", "a URL or null", value)),
                };
                check_manifest_url(v.as_deref())?;
                self.update_manifest_url = v;
            }
            "score_ceiling" => {
                let v = value
                    .as_f64()
                    .ok_or_else(|| wrong("score_ceiling", "a number", value))?;
                check_ceiling(v)?;
                self.score_ceiling = v;
            }
            "inference_keep_days" => {
                let days = value
                    .as_u64()
                    .ok_or_else(|| wrong("inference_keep_days", "a whole number of days", value))?;
                self.inference_keep_days = check_keep_days(days)?;
            }
            "interval_ms" => {
                let ms = value
                    .as_u64()
                    .ok_or_else(|| wrong("interval", "a whole number of ms", value))?;
                Preferences::validate_interval(ms)?;
                self.interval_ms = ms;
            }
            "rest_interval_ms" => {
                let ms = value
                    .as_u64()
                    .ok_or_else(|| wrong("rest_interval", "a whole number of ms", value))?;
                validate_rest_interval(ms)?;
                self.rest_interval_ms = ms;
            }
            "tariffs" => {
                let rules: Vec<TariffRule> =
                    serde_json::from_value(value.clone()).map_err(|e| Error::Invalid {
                        field: "tariffs",
                        message: e.to_string(),
                    })?;
                Tariffs::new(self.price_per_kwh, rules.clone())?;
                self.tariffs = rules;
            }
            "carbon_g_per_kwh" => {
                let v = optional_number("carbon_g_per_kwh", value)?;
                self.carbon_g_per_kwh = Preferences::validate_carbon(v)?;
            }
            "daily_budget_kwh" => {
                self.daily_budget_kwh = positive(
                    "daily_budget_kwh",
                    optional_number("daily_budget_kwh", value)?,
                )?;
            }
            "battery_price" => {
                self.battery_price =
                    positive("battery_price", optional_number("battery_price", value)?)?;
            }
            "battery_rated_cycles" => {
                let cycles = value.as_u64().ok_or_else(|| {
                    wrong("battery_rated_cycles", "a whole number of cycles", value)
                })?;
                self.battery_rated_cycles = super::check_rated_cycles(cycles)?;
            }
            "battery_prices" => {
                // Its size is checked before anything of it is copied.
                let map = value.as_object().ok_or_else(|| {
                    wrong("battery_prices", "an object of batteries by name", value)
                })?;
                if map.len() > super::MAX_PRICED_BATTERIES {
                    return Err(Error::Invalid {
                        field: "battery_prices",
                        message: format!(
                            "{} batteries named, at most {}",
                            map.len(),
                            super::MAX_PRICED_BATTERIES
                        ),
                    });
                }
                let next: std::collections::BTreeMap<String, crate::battery::BatteryPricing> =
                    serde_json::from_value(value.clone()).map_err(|e| Error::Invalid {
                        field: "battery_prices",
                        message: format!(
                            "{e}: each battery is {{\"price\": number, \"rated_cycles\": number}}"
                        ),
                    })?;
                super::check_battery_prices(&next)?;
                self.battery_prices = next;
            }
            "daily_budget_cost" => {
                self.daily_budget_cost = positive(
                    "daily_budget_cost",
                    optional_number("daily_budget_cost", value)?,
                )?;
            }
            "monthly_budget_kwh" => {
                self.monthly_budget_kwh = positive(
                    "monthly_budget_kwh",
                    optional_number("monthly_budget_kwh", value)?,
                )?;
            }
            "monthly_budget_cost" => {
                self.monthly_budget_cost = positive(
                    "monthly_budget_cost",
                    optional_number("monthly_budget_cost", value)?,
                )?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Builds preferences from stored key/value pairs one field at a time, so a bad value costs
    /// only itself: it keeps its default and is returned as a problem to show.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a serde_json::Value)>,
    ) -> (Preferences, Vec<Error>) {
        let mut prefs = Preferences::default();
        let problems = entries
            .into_iter()
            .filter_map(|(k, v)| prefs.set_field(k, v).err())
            .collect();
        (prefs, problems)
    }
}

/// What a policy key takes, for the message when a value has the wrong type.
fn kind_of(key: &str) -> &'static str {
    match key {
        "low_power_auto"
        | "low_power_on_battery"
        | "os_power_mode"
        | "unload_idle_models_in_low_power" => "true or false",
        "low_power_model" => "a model name",
        "low_power_action" => "\"advise\" or \"route\"",
        "low_power_routes" => "an object mapping model names to model names",
        "low_power_max_tokens" => "a whole number of tokens or null",
        "low_power_battery_below_percent" => "a percentage or null",
        "low_power_above_price" => "a price per kWh or null",
        "low_power_min_accuracy" => "a fraction between 0 and 1",
        "low_power_max_itl_ms" => "a number of milliseconds or null",
        _ => "a number",
    }
}

fn optional_number(field: &'static str, value: &serde_json::Value) -> Result<Option<f64>, Error> {
    if value.is_null() {
        return Ok(None);
    }
    value.as_f64().map(Some).ok_or_else(|| Error::Invalid {
        field,
        message: format!("{value} is not a number"),
    })
}
