use super::*;
use serde_json::json;

fn price(v: Value) -> Result<Option<FeedPref>, Error> {
    FeedPref::parse_price(&v, None)
}

#[test]
fn each_source_takes_its_own_fields_and_refuses_anothers() {
    let p = price(json!({"source": "energy-charts", "bzn": "DE-LU", "charges": 0.12, "tax": 0.19}))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("refused"));
    assert_eq!(
        (p.key(), p.charges, p.tax),
        ("energy-charts:DE-LU".into(), 0.12, 0.19)
    );
    let err = price(json!({"source": "energy-charts", "bzn": "DE-LU", "region": "J"}))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
            err.as_deref(),
            Some("price_feed: energy-charts does not take \"region\"; it takes bzn, url, charges, tax, formula")
        );
    assert!(
        price(json!({"source": "energy-charts"})).is_err(),
        "bzn is needed"
    );
    assert!(price(
        json!({"source": "octopus-agile", "product": "AGILE-FLEX-22-11-25", "region": "J"})
    )
    .is_ok());
    assert!(price(json!({"source": "awattar", "country": "fr"})).is_err());
    assert!(price(json!({"source": "nordpool"})).is_err());
    assert!(price(json!({"source": "energy-charts", "bzn": "DE LU"})).is_err());
    assert!(
        price(json!({"source": "energy-charts", "bzn": "DE-LU", "tax": 19})).is_err(),
        "a percentage, not a fraction"
    );
    assert!(
        price(json!({"source": "energy-charts", "bzn": "DE-LU", "charges": 120})).is_err(),
        "per MWh"
    );
    assert!(price(json!({"source": "energy-charts", "bzn": "DE-LU", "token": "x"})).is_err());
    assert_eq!(price(Value::Null).ok(), Some(None));
    let with_formula = price(json!({"source": "awattar", "country": "de",
                                        "formula": "max(price, 0) * 1.19 + 0.12"}))
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("refused"));
    let spot = crate::slots::Series::new(
        crate::slots::Quantity::PricePerKwh,
        Some("EUR".into()),
        vec![
            crate::slots::Slot {
                start: 0.0,
                end: 3600.0,
                value: -0.08,
            },
            crate::slots::Slot {
                start: 3600.0,
                end: 7200.0,
                value: 0.10,
            },
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // −0.08 → 0 + 0.12; 0.10 → 0.119 + 0.12 = 0.239.
    let retail = with_formula.retail(&spot);
    assert_eq!(retail.slots[0].value, 0.12);
    assert!((retail.slots[1].value - 0.239).abs() < 1e-12);
    let text = serde_json::to_string(&with_formula).unwrap_or_default();
    assert!(
        text.contains(r#""formula":"max(price, 0) * 1.19 + 0.12""#),
        "{text}"
    );
    assert!(price(json!({"source": "awattar", "country": "de", "formula": "price +"})).is_err());
    let carbon = FeedPref::parse_carbon(
        &json!({"source": "gb-carbon-intensity", "postcode": "BS7"}),
        None,
    );
    assert_eq!(
        carbon.ok().flatten().map(|c| c.key()).as_deref(),
        Some("gb-carbon-intensity:BS7")
    );
    assert!(FeedPref::parse_carbon(
        &json!({"source": "energy-charts", "country": "de", "charges": 1}),
        None
    )
    .is_err());
}

#[test]
fn a_token_is_never_written_and_a_change_without_one_keeps_it_only_where_it_was_sent() {
    let first = price(json!({"source": "entsoe", "zone": "10Y1001A1001A82H", "token": "s3cret"}))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("refused"));
    assert!(first.has_secret);
    let text = serde_json::to_string(&first).unwrap_or_default();
    assert!(!text.contains("s3cret"), "{text}");
    assert!(!format!("{first:?}").contains("s3cret"));
    // Another zone of the same vendor: the token stays.
    let next = FeedPref::parse_price(
        &json!({"source": "entsoe", "zone": "10YBE----------2"}),
        Some(&first),
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("refused"));
    assert_eq!(next.token.as_deref(), Some("s3cret"));
    // Another address: the securityToken is not sent there; a token is asked for again.
    let elsewhere = FeedPref::parse_price(
        &json!({"source": "entsoe", "zone": "10YBE----------2", "url": "http://127.0.0.1:9/"}),
        Some(&next),
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("refused"));
    assert_eq!(elsewhere.url.as_deref(), Some("http://127.0.0.1:9"));
    assert_eq!((elsewhere.token, elsewhere.has_secret), (None, false));
    let cleared = FeedPref::parse_price(
        &json!({"source": "entsoe", "zone": "10YBE----------2", "token": null}),
        Some(&first),
    )
    .ok()
    .flatten();
    assert_eq!(cleared.map(|c| c.lacks_token()), Some(true));
    assert!(price(json!({"source": "tibber", "url": "http://u:p@host"})).is_err());
}
