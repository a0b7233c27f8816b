//! A price formula, as evcc's tariffs take one: an expression of `price` (the spot price per
//! kWh), `charges` and `tax` (the feed's), giving the price a customer pays per kWh, e.g.
//! `max(price, 0) * 1.19 + charges` for a contract that never pays for a negative hour.
//!
//! Rules:
//! - The expression is compiled once when the preference is set (evalexpr: arithmetic,
//!   comparisons, `if(c, a, b)`, `min`, `max`, `floor`, `round`, `math::abs`; no assignment,
//!   nothing outside the three names), and refused there if it does not give a number.
//! - Every number written in it is a real number: `19/100` is 0.19, as a person reading a
//!   contract means it, never evalexpr's integer division (0).
//! - A slot for which it gives no finite number is no price: left out, so the fallback prices
//!   it, flagged. Never a 0.

use evalexpr::{ContextWithMutableVariables, HashMapContext, Node, Operator, Value};

/// A compiled formula, with the text it was given.
#[derive(Debug, Clone)]
pub struct Formula {
    text: String,
    tree: Node,
}

impl PartialEq for Formula {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

/// Formulas longer than this are not a price's.
pub const MAX_FORMULA_CHARS: usize = 500;

impl Formula {
    /// The formula of `text`, tried on a spot price of 0.10 with no charges or tax.
    pub fn parse(text: &str) -> Result<Formula, String> {
        let text = text.trim();
        if text.len() > MAX_FORMULA_CHARS {
            return Err(format!("longer than {MAX_FORMULA_CHARS} characters"));
        }
        let mut tree = evalexpr::build_operator_tree(text).map_err(|e| e.to_string())?;
        literals_as_floats(&mut tree);
        let f = Formula {
            text: text.to_string(),
            tree,
        };
        f.eval(0.10, 0.0, 0.0)
            .map_err(|e| format!("{e} (tried with price = 0.10)"))?;
        Ok(f)
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The price per kWh for a spot price of `price`; `None` where it gives no finite number.
    pub fn apply(&self, price: f64, charges: f64, tax: f64) -> Option<f64> {
        self.eval(price, charges, tax).ok()
    }

    fn eval(&self, price: f64, charges: f64, tax: f64) -> Result<f64, String> {
        let mut context = HashMapContext::new();
        for (name, v) in [("price", price), ("charges", charges), ("tax", tax)] {
            context
                .set_value(name.into(), Value::Float(v))
                .map_err(|e| e.to_string())?;
        }
        let v = self
            .tree
            .eval_number_with_context(&context)
            .map_err(|e| e.to_string())?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(format!("{v} is not a price"))
        }
    }
}

/// Turns every integer literal of `tree` into the same float, so no operator sees two integers.
fn literals_as_floats(tree: &mut Node) {
    if let Operator::Const {
        value: Value::Int(i),
    } = tree.operator()
    {
        let value = Value::Float(*i as f64);
        *tree.operator_mut() = Operator::Const { value };
    }
    for child in tree.children_mut() {
        literals_as_floats(child);
    }
}

impl serde::Serialize for Formula {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Formula {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Formula::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_formula_turns_a_spot_price_into_what_the_customer_pays() {
        // Never paid for a negative hour, 19 % VAT, then 12 ct of charges:
        // −0.05 → 0 × 1.19 + 0.12 = 0.12; 0.10 → 0.119 + 0.12 = 0.239.
        let f = Formula::parse("max(price, 0) * 1.19 + charges").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.apply(-0.05, 0.12, 0.0), Some(0.12));
        assert!((f.apply(0.10, 0.12, 0.0).unwrap_or_default() - 0.239).abs() < 1e-12);
        let g = Formula::parse("(price + charges) * (1 + tax)").unwrap_or_else(|e| panic!("{e}"));
        assert!((g.apply(0.10, 0.05, 0.19).unwrap_or_default() - 0.1785).abs() < 1e-12);
        assert!(Formula::parse("price +").is_err());
        assert!(Formula::parse("\"cheap\"").is_err(), "not a number");
        assert!(Formula::parse("volume * 2").is_err(), "an unknown name");
        assert!(Formula::parse("price = 3").is_err(), "no assignment");
        let div = Formula::parse("1 / price").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(div.apply(0.0, 0.0, 0.0), None, "infinity is no price");
    }

    #[test]
    fn numbers_in_a_formula_divide_as_a_person_means() {
        // (0.10 + 12/100) × (1 + 19/100) = 0.22 × 1.19 = 0.2618, not (0.10 + 0) × 1 = 0.10.
        let f = Formula::parse("(price + 12/100) * (1 + 19/100)").unwrap_or_else(|e| panic!("{e}"));
        assert!((f.apply(0.10, 0.0, 0.0).unwrap_or_default() - 0.2618).abs() < 1e-12);
        // The issue's own reading: a spot price of 0.20 gives (0.20 + 0.12) × 1.19 = 0.3808.
        assert!((f.apply(0.20, 0.0, 0.0).unwrap_or_default() - 0.3808).abs() < 1e-12);
        // Inside functions too: max(7/2, price) at price 0 is 3.5.
        let g = Formula::parse("max(7/2, price)").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.apply(0.0, 0.0, 0.0), Some(3.5));
    }
}
