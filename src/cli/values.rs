//! How option values are read: numbers whose refusal says what the option takes and means
//! (`--workers -1` is answered, not taken for a flag), and words from a fixed set, listed in
//! help and parsed by the type's own `FromStr`. Durations are read by
//! `mcpbench_knobs::parse_duration`; their options allow a leading hyphen, so that `-5s`
//! reaches it and is answered too.

use std::ffi::OsStr;
use std::fmt::Display;
use std::str::FromStr;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::error::ErrorKind;

/// A number type an option can take, and how its numbers are called in an error.
pub trait Numeric: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static {
    /// "a whole number" or "a number".
    const KIND: &'static str;
    /// Not infinite, not NaN.
    fn is_finite(self) -> bool {
        true
    }
}

macro_rules! whole {
    ($($t:ty),*) => {$(impl Numeric for $t { const KIND: &'static str = "a whole number"; })*};
}
whole!(u16, u32, u64, usize);

impl Numeric for f64 {
    const KIND: &'static str = "a number";
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}

/// The parser of a number option: its type's finite numbers from `least` on (or above it),
/// and what the number counts. Give the option `allow_negative_numbers = true` too, so that
/// `-1` reaches it (and is answered) instead of being taken for a flag.
#[derive(Debug, Clone, Copy)]
pub struct Number<T> {
    least: T,
    /// `least` itself is refused.
    strict: bool,
    what: &'static str,
}

impl<T: Numeric> Number<T> {
    /// Numbers ≥ `least`.
    pub const fn at_least(least: T, what: &'static str) -> Self {
        Number {
            least,
            strict: false,
            what,
        }
    }

    /// Numbers > `floor`.
    pub const fn above(floor: T, what: &'static str) -> Self {
        Number {
            least: floor,
            strict: true,
            what,
        }
    }

    /// `text` as a number this option takes, or what it takes instead.
    pub fn check(&self, text: &str) -> Result<T, String> {
        let ok = |n: T| n.is_finite() && (n > self.least || !self.strict && n == self.least);
        match text.trim().parse::<T>() {
            Ok(n) if ok(n) => Ok(n),
            _ => {
                let bound = if self.strict { ">" } else { "≥" };
                Err(format!(
                    "takes {} {bound} {} ({}); got {text}",
                    T::KIND,
                    self.least,
                    self.what
                ))
            }
        }
    }
}

impl<T: Numeric> TypedValueParser for Number<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        self.check(&value.to_string_lossy()).map_err(|why| {
            let name = arg.map_or_else(String::new, |a| match a.get_long() {
                Some(long) => format!("--{long} "),
                None => format!("<{}> ", a.get_id()),
            });
            clap::Error::raw(ErrorKind::ValueValidation, format!("{name}{why}\n")).with_cmd(cmd)
        })
    }
}

/// The parser of an option whose value is one of `names` (listed in help as its possible
/// values), read by `T`'s `FromStr`.
pub fn one_of<T>(names: impl IntoIterator<Item = &'static str>) -> impl TypedValueParser<Value = T>
where
    T: FromStr + Clone + Send + Sync + 'static,
    T::Err: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    PossibleValuesParser::new(names.into_iter().map(PossibleValue::new)).try_map(|s| s.parse::<T>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_number_says_what_the_option_takes() {
        let users = Number::<u64>::at_least(1, "virtual users");
        assert_eq!(users.check("12"), Ok(12));
        for bad in ["-1", "0", "ten", "1.5", ""] {
            assert_eq!(
                users.check(bad),
                Err(format!(
                    "takes a whole number ≥ 1 (virtual users); got {bad}"
                ))
            );
        }
        let rate = Number::<f64>::above(0.0, "requests per second");
        assert_eq!(rate.check("0.5"), Ok(0.5));
        for bad in ["0", "-3", "inf", "NaN"] {
            assert!(
                rate.check(bad).unwrap_err().contains("a number > 0"),
                "{bad}"
            );
        }
    }
}
