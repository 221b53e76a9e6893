//! Bucket widths: the span of time that one clustering bucket covers (`1d`, `6h`, `90s`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::LayoutError;

const UNITS: [(char, u64); 5] = [
    ('w', 604_800),
    ('d', 86_400),
    ('h', 3_600),
    ('m', 60),
    ('s', 1),
];

/// A positive whole number of seconds, written as `1d`, `6h`, `1h30m`, `15s`, `2w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketWidth(u64);

impl BucketWidth {
    /// The widest bucket accepted: 100 years (wider buckets are one bucket for any real time).
    pub const MAX_SECONDS: u64 = 100 * 366 * 86_400;

    /// A width of this many seconds; zero and widths above [`Self::MAX_SECONDS`] are refused.
    pub fn from_seconds(seconds: u64) -> Result<BucketWidth, LayoutError> {
        if seconds == 0 {
            return Err(LayoutError::BadBucketWidth {
                text: "0s".into(),
                reason: "a bucket width must be positive".into(),
            });
        }
        if seconds > Self::MAX_SECONDS {
            return Err(LayoutError::BadBucketWidth {
                text: format!("{seconds}s"),
                reason: "a bucket width is at most 100 years".into(),
            });
        }
        Ok(BucketWidth(seconds))
    }

    /// One day.
    pub fn day() -> BucketWidth {
        BucketWidth(86_400)
    }

    pub fn seconds(self) -> u64 {
        self.0
    }
}

/// Parses a duration written as `1d`, `6h`, `1h30m`, `15s`, `2w` or `0s` into seconds; the
/// error says what is wrong with it.
pub fn parse_seconds(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty; write a duration such as 1d, 6h, 30m or 15s".into());
    }
    if t.starts_with('-') {
        return Err("a duration cannot be negative".into());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let Some(&(_, unit)) = UNITS.iter().find(|(u, _)| *u == c) else {
            return Err(format!(
                "unknown unit {c:?}; units are w, d, h, m, s (e.g. 1d, 6h, 1h30m)"
            ));
        };
        if digits.is_empty() {
            return Err(format!("unit {c:?} has no number before it"));
        }
        let n: u64 = digits.parse().map_err(|_| "number too large".to_string())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| "too large".to_string())?;
    }
    if !digits.is_empty() {
        return Err("a number needs a unit (w, d, h, m, s), e.g. 1d".into());
    }
    Ok(total)
}

impl FromStr for BucketWidth {
    type Err = LayoutError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| LayoutError::BadBucketWidth {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        if text.trim().starts_with('-') {
            return Err(bad("a bucket width must be positive"));
        }
        let total = parse_seconds(text).map_err(|r| bad(&r))?;
        BucketWidth::from_seconds(total).map_err(|e| match e {
            LayoutError::BadBucketWidth { reason, .. } => bad(&reason),
            other => other,
        })
    }
}

impl fmt::Display for BucketWidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        for (u, secs) in UNITS {
            if rest >= secs {
                write!(f, "{}{u}", rest / secs)?;
                rest %= secs;
            }
        }
        Ok(())
    }
}

impl Serialize for BucketWidth {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BucketWidth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for (text, secs, shown) in [
            ("1d", 86_400, "1d"),
            ("6h", 21_600, "6h"),
            ("1h30m", 5_400, "1h30m"),
            ("15s", 15, "15s"),
            ("86400s", 86_400, "1d"),
            ("7d", 604_800, "1w"),
            ("1w1s", 604_801, "1w1s"),
            (" 2h ", 7_200, "2h"),
        ] {
            let w: BucketWidth = text.parse().unwrap();
            assert_eq!(w.seconds(), secs, "{text}");
            assert_eq!(w.to_string(), shown);
            assert_eq!(shown.parse::<BucketWidth>().unwrap(), w);
        }
    }

    #[test]
    fn refuses_zero_negative_and_garbage() {
        for text in [
            "0s",
            "0d",
            "-1d",
            "",
            "1",
            "d",
            "1y",
            "1.5h",
            "99999999999999999999s",
            "101000d",
        ] {
            let err = text.parse::<BucketWidth>().unwrap_err();
            assert!(
                matches!(err, LayoutError::BadBucketWidth { .. }),
                "{text}: {err}"
            );
            assert!(err.to_string().contains("bucket width"), "{err}");
        }
    }
}
