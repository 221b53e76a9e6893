//! The hits table's layout: the clustering ravel-load was built and measured for.

use ravel_layout::{BucketWidth, ClusteringKey, Layout};

/// The hits table's stream column: a site's counter, the column most statements filter on.
const STREAM: &str = "CounterID";
/// The hits table's time column (unix seconds in the raw convention, a timestamp in the typed).
const TIME: &str = "EventTime";

/// The ClickBench hits layout: stream `CounterID`, 1-day buckets of `EventTime`, key
/// `EventDate, UserID`, Bloom filters on every text column at 1 % false positives.
pub fn layout() -> Layout {
    Layout {
        stream: Some(STREAM.into()),
        time: Some(TIME.into()),
        clustering_key: Some(ClusteringKey {
            columns: vec!["EventDate".into(), "UserID".into()],
            bucket_width: BucketWidth::day(),
        }),
        ..Layout::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Convention, Strings, schema};

    #[test]
    fn the_hits_layout_fits_both_conventions() {
        let l = layout();
        for convention in [Convention::Raw(Strings::Binary), Convention::Typed] {
            l.validate_for(&schema(convention)).unwrap();
        }
        assert_eq!(
            l.sort_key_names(),
            [
                "CounterID",
                "EventTime div 1d",
                "EventDate",
                "UserID",
                "EventTime"
            ]
        );
    }
}
