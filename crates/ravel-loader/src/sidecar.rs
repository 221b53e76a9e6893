//! The Bloom sidecar of a load: each object's filter of each Bloom column, kept per column as
//! the sidecar lays them out, stored as one content-addressed object beside the objects.

use ravel_bloom::{ColumnFilters, EncodedSidecar, SidecarSection};
use ravel_manifest::{BloomIndex, Section};

use crate::LoadError;
use crate::upload::{Put, Uploader};

/// The filters of a load's objects, per column, in manifest order.
#[derive(Debug, Default)]
pub struct BloomSidecar {
    /// Each column's filters, as [`ravel_bloom::encode_sidecar`] takes them.
    columns: Vec<ColumnFilters>,
}

impl BloomSidecar {
    /// A sidecar of these columns (see [`crate::RunEncoder::bloom_column_names`]).
    pub fn new(columns: Vec<String>) -> BloomSidecar {
        BloomSidecar {
            columns: columns
                .into_iter()
                .map(|column| ColumnFilters {
                    column,
                    filters: Vec::new(),
                })
                .collect(),
        }
    }

    /// Adds the next object's filters, one per column in column order.
    pub fn push(&mut self, filters: Vec<Vec<u8>>) {
        debug_assert_eq!(filters.len(), self.columns.len(), "a filter per column");
        for (column, filter) in self.columns.iter_mut().zip(filters) {
            column.filters.push(filter);
        }
    }

    /// Stores the sidecar (content-addressed like the objects, so `gc` collects it when no
    /// manifest lists it) and returns the manifest's index of it; `None` without Bloom
    /// columns. `fpp` is the rate the filters were sized for.
    pub async fn store(
        &self,
        uploader: &Uploader,
        fpp: f64,
    ) -> Result<Option<BloomIndex>, LoadError> {
        if self.columns.is_empty() {
            return Ok(None);
        }
        let EncodedSidecar { bytes, sections } = ravel_bloom::encode_sidecar(&self.columns);
        let size = bytes.len() as u64;
        let Put { path, .. } = uploader
            .put_sidecar("blooms", bytes::Bytes::from(bytes))
            .await?;
        Ok(Some(BloomIndex {
            key: path.to_string(),
            bytes: size,
            format: ravel_bloom::FORMAT,
            fpp,
            columns: sections
                .into_iter()
                .map(
                    |SidecarSection {
                         column,
                         offset,
                         len,
                     }| (column, Section { offset, len }),
                )
                .collect(),
        }))
    }
}
