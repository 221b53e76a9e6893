//! The 105-column ClickBench `hits` schema in two physical conventions.
//!
//! * **raw**, as the public `hits.parquet` stores it: `EventTime`, `ClientEventTime` and
//!   `LocalEventTime` as Int64 unix seconds, `EventDate` as UInt16 days since 1970-01-01,
//!   strings as Binary (the single public file) or Utf8.
//! * **typed**: Timestamp(Second) times, Date32 dates, Utf8 strings.
//!
//! Integers follow ClickBench's CREATE TABLE: SMALLINT → Int16, INTEGER → Int32,
//! BIGINT → Int64. Every column is non-nullable, as in the public files.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// The logical type of a hits column (ClickBench's CREATE TABLE type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SMALLINT: Int16.
    SmallInt,
    /// INTEGER: Int32.
    Int,
    /// BIGINT: Int64.
    BigInt,
    /// TEXT, CHAR, VARCHAR.
    Text,
    /// TIMESTAMP: unix seconds.
    DateTime,
    /// Date: days since 1970-01-01.
    Date,
}

use Kind::*;

/// The hits columns in schema order.
pub const COLUMNS: [(&str, Kind); 105] = [
    ("WatchID", BigInt),
    ("JavaEnable", SmallInt),
    ("Title", Text),
    ("GoodEvent", SmallInt),
    ("EventTime", DateTime),
    ("EventDate", Date),
    ("CounterID", Int),
    ("ClientIP", Int),
    ("RegionID", Int),
    ("UserID", BigInt),
    ("CounterClass", SmallInt),
    ("OS", SmallInt),
    ("UserAgent", SmallInt),
    ("URL", Text),
    ("Referer", Text),
    ("IsRefresh", SmallInt),
    ("RefererCategoryID", SmallInt),
    ("RefererRegionID", Int),
    ("URLCategoryID", SmallInt),
    ("URLRegionID", Int),
    ("ResolutionWidth", SmallInt),
    ("ResolutionHeight", SmallInt),
    ("ResolutionDepth", SmallInt),
    ("FlashMajor", SmallInt),
    ("FlashMinor", SmallInt),
    ("FlashMinor2", Text),
    ("NetMajor", SmallInt),
    ("NetMinor", SmallInt),
    ("UserAgentMajor", SmallInt),
    ("UserAgentMinor", Text),
    ("CookieEnable", SmallInt),
    ("JavascriptEnable", SmallInt),
    ("IsMobile", SmallInt),
    ("MobilePhone", SmallInt),
    ("MobilePhoneModel", Text),
    ("Params", Text),
    ("IPNetworkID", Int),
    ("TraficSourceID", SmallInt),
    ("SearchEngineID", SmallInt),
    ("SearchPhrase", Text),
    ("AdvEngineID", SmallInt),
    ("IsArtifical", SmallInt),
    ("WindowClientWidth", SmallInt),
    ("WindowClientHeight", SmallInt),
    ("ClientTimeZone", SmallInt),
    ("ClientEventTime", DateTime),
    ("SilverlightVersion1", SmallInt),
    ("SilverlightVersion2", SmallInt),
    ("SilverlightVersion3", Int),
    ("SilverlightVersion4", SmallInt),
    ("PageCharset", Text),
    ("CodeVersion", Int),
    ("IsLink", SmallInt),
    ("IsDownload", SmallInt),
    ("IsNotBounce", SmallInt),
    ("FUniqID", BigInt),
    ("OriginalURL", Text),
    ("HID", Int),
    ("IsOldCounter", SmallInt),
    ("IsEvent", SmallInt),
    ("IsParameter", SmallInt),
    ("DontCountHits", SmallInt),
    ("WithHash", SmallInt),
    ("HitColor", Text),
    ("LocalEventTime", DateTime),
    ("Age", SmallInt),
    ("Sex", SmallInt),
    ("Income", SmallInt),
    ("Interests", SmallInt),
    ("Robotness", SmallInt),
    ("RemoteIP", Int),
    ("WindowName", Int),
    ("OpenerName", Int),
    ("HistoryLength", SmallInt),
    ("BrowserLanguage", Text),
    ("BrowserCountry", Text),
    ("SocialNetwork", Text),
    ("SocialAction", Text),
    ("HTTPError", SmallInt),
    ("SendTiming", Int),
    ("DNSTiming", Int),
    ("ConnectTiming", Int),
    ("ResponseStartTiming", Int),
    ("ResponseEndTiming", Int),
    ("FetchTiming", Int),
    ("SocialSourceNetworkID", SmallInt),
    ("SocialSourcePage", Text),
    ("ParamPrice", BigInt),
    ("ParamOrderID", Text),
    ("ParamCurrency", Text),
    ("ParamCurrencyID", SmallInt),
    ("OpenstatServiceName", Text),
    ("OpenstatCampaignID", Text),
    ("OpenstatAdID", Text),
    ("OpenstatSourceID", Text),
    ("UTMSource", Text),
    ("UTMMedium", Text),
    ("UTMCampaign", Text),
    ("UTMContent", Text),
    ("UTMTerm", Text),
    ("FromTag", Text),
    ("HasGCLID", SmallInt),
    ("RefererHash", BigInt),
    ("URLHash", BigInt),
    ("CLID", Int),
];

/// How strings are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strings {
    /// Binary, as the single public hits.parquet stores them.
    #[default]
    Binary,
    /// Utf8.
    Utf8,
}

/// The physical convention of times, dates and strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convention {
    /// Int64 seconds, UInt16 days, strings as given.
    Raw(Strings),
    /// Timestamp(Second), Date32, Utf8.
    Typed,
}

impl Default for Convention {
    fn default() -> Self {
        Convention::Raw(Strings::Binary)
    }
}

impl Kind {
    /// The Arrow type of this kind under a convention.
    pub fn data_type(self, convention: Convention) -> DataType {
        match (self, convention) {
            (SmallInt, _) => DataType::Int16,
            (Int, _) => DataType::Int32,
            (BigInt, _) => DataType::Int64,
            (Text, Convention::Raw(Strings::Binary)) => DataType::Binary,
            (Text, _) => DataType::Utf8,
            (DateTime, Convention::Raw(_)) => DataType::Int64,
            (DateTime, Convention::Typed) => DataType::Timestamp(TimeUnit::Second, None),
            (Date, Convention::Raw(_)) => DataType::UInt16,
            (Date, Convention::Typed) => DataType::Date32,
        }
    }
}

/// The hits schema under a convention.
pub fn schema(convention: Convention) -> SchemaRef {
    Arc::new(Schema::new(
        COLUMNS
            .iter()
            .map(|(name, kind)| Field::new(*name, kind.data_type(convention), false))
            .collect::<Vec<_>>(),
    ))
}

/// The index of a hits column by name.
pub fn index_of(name: &str) -> Option<usize> {
    COLUMNS.iter().position(|(n, _)| *n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference columns (ClickBench's names, order and hits.parquet's Arrow types) are
    /// kept in the repository's fixtures, with their source named there.
    #[test]
    fn matches_the_clickbench_reference() {
        let text = include_str!("../../../fixtures/clickbench/hits-columns.tsv");
        let raw = schema(Convention::Raw(Strings::Binary));
        let rows: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split('\t').collect())
            .collect();
        assert_eq!(rows.len(), 105);
        for (i, row) in rows.iter().enumerate() {
            let field = raw.field(i);
            assert_eq!(row[0], (i + 1).to_string());
            assert_eq!(row[1], field.name());
            let arrow = row[2];
            let expected = match field.data_type() {
                DataType::Int16 => "Int16",
                DataType::Int32 => "Int32",
                DataType::Int64 if arrow.starts_with("Int64 (unix") => "Int64 (unix seconds)",
                DataType::Int64 => "Int64",
                DataType::UInt16 => "UInt16 (days since 1970-01-01)",
                DataType::Binary => "Utf8View*",
                other => panic!("unexpected {other}"),
            };
            assert_eq!(arrow, expected, "column {}", field.name());
        }
    }

    #[test]
    fn conventions() {
        let typed = schema(Convention::Typed);
        assert_eq!(
            typed.field_with_name("EventTime").unwrap().data_type(),
            &DataType::Timestamp(TimeUnit::Second, None)
        );
        assert_eq!(
            typed.field_with_name("EventDate").unwrap().data_type(),
            &DataType::Date32
        );
        assert_eq!(
            typed.field_with_name("URL").unwrap().data_type(),
            &DataType::Utf8
        );
        let raw = schema(Convention::Raw(Strings::Utf8));
        assert_eq!(
            raw.field_with_name("URL").unwrap().data_type(),
            &DataType::Utf8
        );
        assert_eq!(
            raw.field_with_name("EventDate").unwrap().data_type(),
            &DataType::UInt16
        );
        assert_eq!(index_of("CounterID"), Some(6));
        let text = COLUMNS.iter().filter(|(_, k)| *k == Text).count();
        assert_eq!(text, 28);
    }
}
