//! Table layout settings: the layout document (stream, time, clustering key, bucket width,
//! Bloom scope), its validation, its storage with compare-and-swap updates, and the one
//! implementation of the clustering order.

mod bucket;
mod document;
mod error;
mod maintenance;
mod order;
mod retention;
mod service;

pub use bucket::{BucketWidth, parse_seconds};
pub use document::{
    Bloom, BloomScope, ClusteringKey, FENCE_PROPERTY, LAYOUT_FORMAT, Layout, is_orderable, is_text,
    is_time_type,
};
pub use error::LayoutError;
pub use maintenance::{MAX_POLICY_RUNS, Maintenance, MaintenanceMode};
pub use order::{ClusteringOrder, clustering_permutation, normalized_order, time_bucket};
pub use retention::{
    FILES_PROPERTY, INPUTS_PROPERTY, LOG_PROPERTY, Retention, RetentionProperty, interval,
    parse_interval,
};
pub use service::{LayoutStore, TableSchema, Updated};
