//! The currency every price and cost is in: an ISO 4217 code.

use super::*;

/// An ISO 4217 currency code: three ASCII capital letters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Currency(String);

impl Currency {
    pub fn parse(code: &str) -> Result<Self, Error> {
        let code = code.trim();
        if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            Ok(Currency(code.to_string()))
        } else {
            Err(Error::Invalid {
                field: "currency",
                message: format!("{code:?} is not an ISO 4217 code such as EUR or USD"),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Currency {
    fn default() -> Self {
        Currency("EUR".to_string())
    }
}

impl TryFrom<String> for Currency {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        Currency::parse(&s)
    }
}

impl From<Currency> for String {
    fn from(c: Currency) -> String {
        c.0
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
