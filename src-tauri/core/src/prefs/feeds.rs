//! The `price_feed` and `carbon_feed` preferences: where prices and grid intensities that move
//! by the slot are read. Null (the default) for none: the fixed price with its time-of-use rules,
//! and the fixed `carbon_g_per_kwh`, as before.
//!
//! - `{"source", …}`; each source takes the fields its vendor asks for ([`PRICE_SOURCES`],
//!   [`CARBON_SOURCES`]), and a field another source takes is refused, not ignored.
//! - `url`: the feed's base address, for a mirror or a loopback fake; `http(s)://`, no
//!   password in it (it would be written to the preferences file).
//! - Prices: `charges` per kWh and `tax` as a fraction turn a spot price into the retail one,
//!   `(spot + charges) × (1 + tax)`, as evcc's tariffs do. Tibber's and Home Assistant's prices
//!   are retail already: both default to 0 there.
//! - `token`: a secret as the wall meter's are: never serialized; the engine keeps it in a file
//!   readable by its user alone. A change that leaves it out keeps the one set before for the
//!   same source at the same origin (its vendor's, or the same mirror's: see
//!   [`crate::secret`]); null or "" clears it.

use crate::error::Error;
use crate::formula::Formula;
use crate::slots::{Retail, Series};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A feed: `source` and the fields it takes.
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct FeedPref {
    pub source: String,
    /// Energy-Charts' bidding zone (`DE-LU`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bzn: Option<String>,
    /// aWATTar's `de` or `at`; Energy-Charts' carbon country (`de`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// Octopus's product (`AGILE-FLEX-22-11-25`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    /// Octopus's region letter (`A`–`P`); the GB Carbon Intensity region id (1–17).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The GB Carbon Intensity postcode area (`BS7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postcode: Option<String>,
    /// ENTSO-E's bidding zone, an EIC code (`10Y1001A1001A82H`); Electricity Maps' zone (`DE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Home Assistant's price entity (`sensor.electricity_price`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Added to the spot price per kWh, before tax.
    pub charges: f64,
    /// A fraction: 0.19 for 19 %.
    pub tax: f64,
    /// What turns the spot price into the retail one instead of `(price + charges) × (1 + tax)`
    /// ([`Formula`]): `max(price, 0) * 1.19 + charges`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formula: Option<Formula>,
    /// Whether a token is kept (never the token itself).
    #[serde(skip_deserializing)]
    pub has_secret: bool,
    #[serde(skip)]
    pub token: Option<String>,
}

/// Shows where the feed is, never its token.
impl std::fmt::Debug for FeedPref {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedPref")
            .field("source", &self.source)
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

/// A source: its name, the fields it needs, the fields it may take, and whether it needs a
/// token.
struct Kind {
    name: &'static str,
    needs: &'static [&'static str],
    may: &'static [&'static str],
    token: bool,
}

const PRICE_KINDS: [Kind; 6] = [
    Kind {
        name: "energy-charts",
        needs: &["bzn"],
        may: &[],
        token: false,
    },
    Kind {
        name: "awattar",
        needs: &["country"],
        may: &[],
        token: false,
    },
    Kind {
        name: "octopus-agile",
        needs: &["product", "region"],
        may: &[],
        token: false,
    },
    Kind {
        name: "entsoe",
        needs: &["zone"],
        may: &[],
        token: true,
    },
    Kind {
        name: "tibber",
        needs: &[],
        may: &[],
        token: true,
    },
    Kind {
        name: "homeassistant",
        needs: &["entity", "url"],
        may: &[],
        token: true,
    },
];

const CARBON_KINDS: [Kind; 3] = [
    Kind {
        name: "energy-charts",
        needs: &["country"],
        may: &[],
        token: false,
    },
    Kind {
        name: "gb-carbon-intensity",
        needs: &[],
        may: &["region", "postcode"],
        token: false,
    },
    Kind {
        name: "electricity-maps",
        needs: &["zone"],
        may: &[],
        token: true,
    },
];

/// The price sources, as `source` names them.
pub const PRICE_SOURCES: [&str; 6] = [
    "energy-charts",
    "awattar",
    "octopus-agile",
    "entsoe",
    "tibber",
    "homeassistant",
];
/// The carbon sources.
pub const CARBON_SOURCES: [&str; 3] = ["energy-charts", "gb-carbon-intensity", "electricity-maps"];

/// Charges above this per kWh are a unit typed wrong (per MWh, or cents).
pub const MAX_CHARGES_PER_KWH: f64 = 10.0;

const AREA_FIELDS: [&str; 7] = [
    "bzn", "country", "product", "region", "postcode", "zone", "entity",
];

impl FeedPref {
    /// The price feed from a value a person or a file gave; `previous`: the one set before,
    /// whose token is kept where this one leaves it out.
    pub fn parse_price(value: &Value, previous: Option<&FeedPref>) -> Result<Option<Self>, Error> {
        FeedPref::parse("price_feed", &PRICE_KINDS, value, previous)
    }

    /// The carbon feed, likewise.
    pub fn parse_carbon(value: &Value, previous: Option<&FeedPref>) -> Result<Option<Self>, Error> {
        FeedPref::parse("carbon_feed", &CARBON_KINDS, value, previous)
    }

    /// A name for the feed that the ledger keys its cache by: the source and its area
    /// (`energy-charts:DE-LU`), so another area never reads this one's slots.
    pub fn key(&self) -> String {
        let area: Vec<&str> = [
            &self.bzn,
            &self.country,
            &self.product,
            &self.region,
            &self.postcode,
            &self.zone,
            &self.entity,
        ]
        .into_iter()
        .filter_map(|f| f.as_deref())
        .collect();
        if area.is_empty() {
            self.source.clone()
        } else {
            format!("{}:{}", self.source, area.join(":"))
        }
    }

    fn parse(
        field: &'static str,
        kinds: &[Kind],
        value: &Value,
        previous: Option<&FeedPref>,
    ) -> Result<Option<Self>, Error> {
        let invalid = |message: String| Error::Invalid { field, message };
        let map = match value {
            Value::Null => return Ok(None),
            Value::Object(m) => m,
            other => return Err(invalid(format!("{other} is not a feed's object or null"))),
        };
        let source = match map.get("source") {
            Some(Value::String(s)) => s.trim().to_ascii_lowercase(),
            _ => String::new(),
        };
        let names: Vec<&str> = kinds.iter().map(|k| k.name).collect();
        let kind = kinds
            .iter()
            .find(|k| k.name == source)
            .ok_or_else(|| invalid(format!("source must be one of {}", names.join(", "))))?;
        let mut pref = FeedPref {
            source: source.clone(),
            ..FeedPref::default()
        };
        for (key, v) in map {
            let text = || match v {
                Value::String(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
                Value::Null => Ok(None),
                Value::String(_) => Ok(None),
                other => Err(invalid(format!("{key}: {other} is not text"))),
            };
            match key.as_str() {
                "source" | "has_secret" => {}
                "url" => pref.url = text()?,
                "formula" if field == "price_feed" => {
                    pref.formula = text()?
                        .map(|t| Formula::parse(&t))
                        .transpose()
                        .map_err(|e| invalid(format!("formula: {e}")))?;
                }
                "token" => pref.token = text()?,
                "charges" | "tax" if field == "price_feed" => {
                    let n = match v {
                        Value::Null => 0.0,
                        other => other
                            .as_f64()
                            .ok_or_else(|| invalid(format!("{key}: {other} is not a number")))?,
                    };
                    if key == "charges" {
                        if !(n.is_finite()
                            && (-MAX_CHARGES_PER_KWH..=MAX_CHARGES_PER_KWH).contains(&n))
                        {
                            return Err(invalid(format!(
                                "charges: {n} per kWh is outside ±{MAX_CHARGES_PER_KWH}; enter the charges on one kWh"
                            )));
                        }
                        pref.charges = n;
                    } else {
                        if !(n.is_finite() && (0.0..=1.0).contains(&n)) {
                            return Err(invalid(format!(
                                "tax: {n} is not a fraction between 0 and 1 (0.19 for 19 %)"
                            )));
                        }
                        pref.tax = n;
                    }
                }
                k if AREA_FIELDS.contains(&k)
                    && (kind.needs.contains(&k) || kind.may.contains(&k)) =>
                {
                    let t = text()?;
                    if t.as_deref().is_some_and(|t| {
                        !t.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                    }) {
                        return Err(invalid(format!("{k}: {v} is not a code such as DE-LU")));
                    }
                    *pref.area_mut(k) = t;
                }
                other => {
                    let mut takes: Vec<&str> = kind.needs.iter().chain(kind.may).copied().collect();
                    takes.extend(["url"]);
                    if field == "price_feed" {
                        takes.extend(["charges", "tax", "formula"]);
                    }
                    if kind.token {
                        takes.push("token");
                    }
                    return Err(invalid(format!(
                        "{source} does not take {other:?}; it takes {}",
                        takes.join(", ")
                    )));
                }
            }
        }
        if let Some(missing) = kind.needs.iter().find(|k| match **k {
            "url" => pref.url.is_none(),
            k => pref.area(k).is_none(),
        }) {
            return Err(invalid(format!("{source} needs {missing}")));
        }
        if let Some(url) = &pref.url {
            check_url(url).map_err(|m| invalid(format!("url: {m}")))?;
            pref.url = Some(url.trim_end_matches('/').to_string());
        }
        if pref.source == "awattar"
            && !matches!(pref.country.as_deref(), Some("de" | "at" | "DE" | "AT"))
        {
            return Err(invalid("awattar's country is de or at".into()));
        }
        if !kind.token {
            if map.get("token").is_some_and(|t| !t.is_null()) {
                return Err(invalid(format!("{source} takes no token")));
            }
        } else if !map.contains_key("token") {
            // Kept only for the same source at the same origin: its own vendor's, or the
            // same mirror's.
            pref.token = previous
                .filter(|p| p.source == pref.source)
                .filter(|p| match (&p.url, &pref.url) {
                    (None, None) => true,
                    (Some(a), Some(b)) => crate::secret::same_origin(a, b),
                    _ => false,
                })
                .and_then(|p| p.token.clone());
        }
        pref.has_secret = pref.token.is_some();
        Ok(Some(pref))
    }

    /// The prices a customer pays of `spot`'s slots: by the formula where one is set, else
    /// `(spot + charges) × (1 + tax)`. A carbon feed's values are as they are.
    pub fn retail(&self, spot: &Series) -> Series {
        match (&self.formula, spot.quantity) {
            (_, crate::slots::Quantity::GramsPerKwh) => spot.clone(),
            (Some(f), _) => spot.map_values(|p| f.apply(p, self.charges, self.tax)),
            (None, _) => spot.retail(Retail {
                charges_per_kwh: self.charges,
                tax: self.tax,
            }),
        }
    }

    fn area_mut(&mut self, key: &str) -> &mut Option<String> {
        match key {
            "bzn" => &mut self.bzn,
            "country" => &mut self.country,
            "product" => &mut self.product,
            "region" => &mut self.region,
            "postcode" => &mut self.postcode,
            "zone" => &mut self.zone,
            _ => &mut self.entity,
        }
    }

    fn area(&self, key: &str) -> Option<&str> {
        match key {
            "bzn" => self.bzn.as_deref(),
            "country" => self.country.as_deref(),
            "product" => self.product.as_deref(),
            "region" => self.region.as_deref(),
            "postcode" => self.postcode.as_deref(),
            "zone" => self.zone.as_deref(),
            _ => self.entity.as_deref(),
        }
    }

    /// Whether this feed's source needs a token, which it lacks.
    pub fn lacks_token(&self) -> bool {
        PRICE_KINDS
            .iter()
            .chain(&CARBON_KINDS)
            .any(|k| k.name == self.source && k.token)
            && self.token.is_none()
            && self.source != "homeassistant"
    }
}

/// `http(s)://host…` with no credentials and no spaces.
fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("{url:?} is not an http:// or https:// address"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{url:?} is not an address"));
    }
    if authority.contains('@') {
        return Err("an address may not hold a password: give the token instead".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
