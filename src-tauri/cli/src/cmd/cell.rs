//! A figure as the commands' tables show it: to `digits` decimals, `—` where it is not known
//! (never 0).

pub fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{x:.digits$}"))
}
