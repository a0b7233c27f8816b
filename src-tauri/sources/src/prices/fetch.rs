//! Asking a price or carbon feed: the request each source's vendor documents, under the
//! outbound policy ([`wattbar_outbound::FEED`]: its timeout, the answer capped, https kept
//! https), and the answer to that source's parser.
//!
//! Rules:
//! - One fetch asks for yesterday, today and tomorrow (what is published of it): the days a
//!   restart or an offline stretch prices from, and what `run --defer` chooses in.
//! - The base address is the preference's `url` where given (a mirror, a loopback fake), else
//!   the vendor's; paths and queries are the vendor's either way.
//! - A token goes as the vendor asks (a header; ENTSO-E's in the query) and never into a
//!   message: messages name the base address alone. It is held bound to the base's origin
//!   ([`Bound`]) and asked for by each request's own address, so a page elsewhere gets none.
//! - A feed that cannot be reached, or answers an error status, is [`Error::Transient`] with
//!   the reason; bytes that are not its shape are [`Error::Parse`].

use super::{awattar, carbon_intensity, electricity_maps, energy_charts, entsoe};
use super::{homeassistant, octopus, tibber};
use crate::Error;
use wattbar_core::prefs::FeedPref;
use wattbar_core::secret::Bound;
use wattbar_core::slots::Series;
use wattbar_outbound::FEED;

/// Octopus pages followed at most (100 half-hours a page: three days is 144).
const OCTOPUS_PAGES: usize = 4;

/// One feed, asked again at each [`FeedClient::fetch`].
pub struct FeedClient {
    agent: ureq::Agent,
    /// The preference, without its token.
    pref: FeedPref,
    base: String,
    token: Option<Bound>,
}

impl std::fmt::Debug for FeedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedClient")
            .field("source", &self.pref.source)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// The vendor's base address for `pref`'s source.
fn vendor_base(pref: &FeedPref) -> String {
    match pref.source.as_str() {
        "energy-charts" => "https://api.energy-charts.info".into(),
        "awattar" => format!(
            "https://api.awattar.{}",
            pref.country.as_deref().unwrap_or("de").to_ascii_lowercase()
        ),
        "octopus-agile" => "https://api.octopus.energy".into(),
        "entsoe" => "https://web-api.tp.entsoe.eu".into(),
        "tibber" => "https://api.tibber.com/v1-beta/gql".into(),
        "gb-carbon-intensity" => "https://api.carbonintensity.org.uk".into(),
        "electricity-maps" => "https://api.electricitymap.org".into(),
        _ => String::new(),
    }
}

impl FeedClient {
    /// A client of the feed `pref` names; `carbon`: it is the carbon feed (Energy-Charts
    /// serves both).
    pub fn new(pref: &FeedPref) -> Result<FeedClient, Error> {
        let base = pref.url.clone().unwrap_or_else(|| vendor_base(pref));
        let address = wattbar_outbound::address(&base, "the feed", Some("the feed's token"))
            .map_err(|e| Error::Unavailable(e.to_string()))?;
        if pref.lacks_token() {
            return Err(Error::Unavailable(format!(
                "{} needs a token: set it in the preferences",
                pref.source
            )));
        }
        let config = wattbar_outbound::config(&FEED, address.https)
            .map_err(|e| Error::Unavailable(format!("{}: {e}", address.url)))?
            .http_status_as_error(false)
            .build();
        let base = address.url.trim_end_matches('/').to_string();
        Ok(FeedClient {
            agent: crate::resolver::agent(config),
            token: pref.token.clone().and_then(|t| Bound::new(&base, t)),
            pref: FeedPref {
                token: None,
                ..pref.clone()
            },
            base,
        })
    }

    /// Where the feed is asked, as messages show it.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The feed's price slots (spot, per kWh) or intensities around `now_unix`; `carbon`
    /// picks Energy-Charts' `/co2eq` over its `/price`.
    pub fn fetch(&self, now_unix: f64, carbon: bool) -> Result<Series, Error> {
        let day = 86_400.0;
        let from = (now_unix / day).floor() * day - day;
        let to = from + 3.0 * day;
        let p = &self.pref;
        let area = |v: &Option<String>| v.clone().unwrap_or_default();
        match p.source.as_str() {
            "energy-charts" if carbon => {
                let url = format!(
                    "{}/co2eq?country={}&start={}&end={}",
                    self.base,
                    area(&p.country).to_ascii_lowercase(),
                    date(from),
                    date(to)
                );
                energy_charts::parse_co2eq(&self.get(&url, &[])?)
            }
            "energy-charts" => {
                let url = format!(
                    "{}/price?bzn={}&start={}&end={}",
                    self.base,
                    area(&p.bzn),
                    date(from),
                    date(to)
                );
                energy_charts::parse_price(&self.get(&url, &[])?)
            }
            "awattar" => {
                let url = format!(
                    "{}/v1/marketdata?start={}&end={}",
                    self.base,
                    (from * 1000.0) as i64,
                    (to * 1000.0) as i64
                );
                awattar::parse_marketdata(&self.get(&url, &[])?)
            }
            "octopus-agile" => self.octopus(from, to),
            "entsoe" => {
                let zone = area(&p.zone);
                let url = format!(
                    "{}/api?securityToken={}&documentType=A44&in_Domain={zone}&out_Domain={zone}&periodStart={}&periodEnd={}",
                    self.base,
                    self.token_for(&self.base).unwrap_or_default(),
                    compact(from),
                    compact(to)
                );
                entsoe::parse_a44(&self.get(&url, &[])?)
            }
            "tibber" => {
                let body = serde_json::json!({ "query": tibber::QUERY }).to_string();
                let bytes = self.send_post(&self.base, &body)?;
                tibber::parse_price_info(&bytes)
            }
            "homeassistant" => {
                let url = format!("{}/api/states/{}", self.base, area(&p.entity));
                let bytes = self.get(&url, &self.bearer(&url))?;
                homeassistant::parse_entity(&bytes, now_unix)
            }
            "gb-carbon-intensity" => {
                let start = chrono::DateTime::from_timestamp(now_unix as i64, 0)
                    .map(|d| d.format("%Y-%m-%dT%H:%MZ").to_string())
                    .unwrap_or_default();
                let url = match (&p.postcode, &p.region) {
                    (Some(pc), _) => {
                        format!(
                            "{}/regional/intensity/{start}/fw48h/postcode/{pc}",
                            self.base
                        )
                    }
                    (None, Some(id)) => {
                        format!(
                            "{}/regional/intensity/{start}/fw48h/regionid/{id}",
                            self.base
                        )
                    }
                    (None, None) => format!("{}/intensity/{start}/fw48h", self.base),
                };
                carbon_intensity::parse_intensity(&self.get(&url, &[])?)
            }
            "electricity-maps" => {
                let url = format!(
                    "{}/v3/carbon-intensity/latest?zone={}",
                    self.base,
                    area(&p.zone)
                );
                let token = self.token_for(&url).unwrap_or_default().to_string();
                electricity_maps::parse_latest(&self.get(&url, &[("auth-token", token)])?)
            }
            other => Err(Error::Unavailable(format!("{other} is not a feed"))),
        }
    }

    /// The token, for a request to `url`: none where `url` is not the feed's own origin.
    fn token_for(&self, url: &str) -> Option<&str> {
        self.token.as_ref()?.for_address(url)
    }

    fn bearer(&self, url: &str) -> Vec<(&'static str, String)> {
        self.token_for(url)
            .map(|t| vec![("Authorization", format!("Bearer {t}"))])
            .unwrap_or_default()
    }

    /// Octopus's pages from `from` to `to`, following `next` while it stays at this base's
    /// origin (by scheme, host and port, not by its text: `https://api.octopus.energy.evil/`
    /// and `https://api.octopus.energy@evil/` both begin with the base).
    fn octopus(&self, from: f64, to: f64) -> Result<Series, Error> {
        let p = &self.pref;
        let product = p.product.clone().unwrap_or_default();
        let region = p.region.clone().unwrap_or_default().to_ascii_uppercase();
        let mut url = format!(
            "{}/v1/products/{product}/electricity-tariffs/E-1R-{product}-{region}/standard-unit-rates/?period_from={}&period_to={}",
            self.base,
            iso(from),
            iso(to)
        );
        let mut all: Option<Series> = None;
        for _ in 0..OCTOPUS_PAGES {
            let (page, next) = octopus::parse_unit_rates(&self.get(&url, &[])?)?;
            all = Some(match all {
                None => page,
                Some(a) => a.merged(&page),
            });
            match next {
                Some(n) if wattbar_core::secret::same_origin(&n, &self.base) => url = n,
                _ => break,
            }
        }
        all.ok_or_else(|| Error::Transient(format!("{}: no unit rates", self.base)))
    }

    fn get(&self, url: &str, headers: &[(&str, String)]) -> Result<Vec<u8>, Error> {
        let mut request = self.agent.get(url);
        for (k, v) in headers {
            request = request.header(*k, v);
        }
        self.answer(request.call())
    }

    fn send_post(&self, url: &str, body: &str) -> Result<Vec<u8>, Error> {
        let mut request = self
            .agent
            .post(url)
            .header("Content-Type", "application/json");
        for (k, v) in self.bearer(url) {
            request = request.header(k, v);
        }
        self.answer(request.send(body))
    }

    fn answer(
        &self,
        result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Vec<u8>, Error> {
        let mut answer = result.map_err(|e| {
            Error::Transient(format!("{}: {}", self.base, wattbar_outbound::reason(&e)))
        })?;
        let status = answer.status();
        let body = wattbar_outbound::read(answer.body_mut(), &FEED).map_err(|e| {
            Error::Transient(format!("{}: {}", self.base, wattbar_outbound::reason(&e)))
        })?;
        // ENTSO-E says "no data" in an XML acknowledgement with status 200 or 400; its parser
        // tells that apart. Any other error status is the feed's refusal.
        let acknowledged = self.pref.source == "entsoe" && status.as_u16() == 400;
        if !(status.is_success() || acknowledged) {
            return Err(Error::Transient(format!("{} answered {status}", self.base)));
        }
        Ok(body)
    }
}

fn utc(unix: f64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(unix as i64, 0).unwrap_or_default()
}

/// `2024-12-08`, as Energy-Charts takes a day.
fn date(unix: f64) -> String {
    utc(unix).format("%Y-%m-%d").to_string()
}

/// `202412080000`, as ENTSO-E takes a time (UTC).
fn compact(unix: f64) -> String {
    utc(unix).format("%Y%m%d%H%M").to_string()
}

/// `2024-12-08T00:00:00Z`.
fn iso(unix: f64) -> String {
    utc(unix).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_each_vendor_takes_them() {
        // 2024-12-08T13:45:00Z.
        let t = 1_733_665_500.0;
        assert_eq!(date(t), "2024-12-08");
        assert_eq!(compact(t), "202412081345");
        assert_eq!(iso(t), "2024-12-08T13:45:00Z");
    }

    /// A loopback server answering each request by `answer(its own address, path)`; its
    /// address and the paths it was asked, as they come.
    fn pages(
        answer: impl Fn(&str, &str) -> String + Send + 'static,
    ) -> (String, std::sync::mpsc::Receiver<String>) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let me = format!(
            "http://{}",
            listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let shown = me.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().map_while(Result::ok) {
                let mut reader = BufReader::new(&mut stream);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let body = answer(&me, &path);
                let _ = tx.send(path);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (shown, rx)
    }

    /// One half-hour from `start` at 21 p, and the next page's address.
    fn page(start: &str, next: Option<&str>) -> String {
        serde_json::json!({"count": 2, "next": next, "previous": null, "results": [
            {"value_exc_vat": 20.0, "value_inc_vat": 21.0,
             "valid_from": format!("2024-05-07T{start}:00Z"),
             "valid_to": format!("2024-05-07T{start}:00Z").replace(":00:00Z", ":30:00Z")}]})
        .to_string()
    }

    #[test]
    fn octopus_follows_a_next_page_at_its_own_origin_only() {
        let (elsewhere, asked_elsewhere) = pages(|_, _| page("23:00", None));
        let host_elsewhere = elsewhere.trim_start_matches("http://").to_string();
        // Page 1 names page 2 at the same origin; page 2 names a page 3 whose text begins
        // with the base, at another host (the part before `@` is a user name).
        let (base, asked) = pages(move |me, path| {
            if path.contains("page=2") {
                page("22:00", Some(&format!("{me}@{host_elsewhere}/page=3")))
            } else {
                page("21:00", Some(&format!("{me}/page=2")))
            }
        });
        let pref = FeedPref {
            source: "octopus-agile".into(),
            product: Some("AGILE-FLEX-22-11-25".into()),
            region: Some("j".into()),
            url: Some(base.clone()),
            ..FeedPref::default()
        };
        let client = FeedClient::new(&pref).unwrap_or_else(|e| panic!("{e}"));
        let series = client
            .fetch(1_715_119_200.0, false)
            .unwrap_or_else(|e| panic!("{e}"));
        // 21:00 and 22:00 from the base; 23:00 was never asked for.
        assert_eq!(series.slots.len(), 2, "{:?}", series.slots);
        let paths: Vec<String> = asked.try_iter().collect();
        assert_eq!(paths.len(), 2, "{paths:?}");
        assert!(
            paths[0].contains("/standard-unit-rates/?period_from="),
            "{paths:?}"
        );
        assert_eq!(paths[1], "/page=2");
        assert_eq!(
            asked_elsewhere.try_iter().count(),
            0,
            "another host was asked"
        );
    }
}
