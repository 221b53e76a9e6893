//! Batches given the table's schema: the columns checked against it, NOT NULL columns
//! checked for nulls, and nested types given the table's child types.

use super::*;

/// Checks that `batch` agrees with the table's schema (see
/// [`ravel_manifest::schema_difference`]); the error names `input` and the first column that
/// differs, or, when only the order differs, the input's first column.
pub(crate) fn check_same(
    table: &SchemaRef,
    batch: &SchemaRef,
    input: &str,
) -> Result<(), LoadError> {
    let Some(difference) = ravel_manifest::schema_difference(table, batch) else {
        return Ok(());
    };
    let (column, problem) = match difference.kind {
        DifferenceKind::Order => (batch.field(0).name().clone(), ColumnProblem::Order),
        kind => (
            difference.column,
            ColumnProblem::Differs {
                kind,
                detail: difference.problem,
            },
        ),
    };
    Err(LoadError::Schema {
        input: input.into(),
        column,
        problem,
    })
}

/// `batch` with the table's `schema`: a column the table says is NOT NULL must hold no null
/// (the error names the column and the row, 1-based in the input, `first_row` being the
/// batch's first row's 0-based number there); a column whose type differs from the table's
/// only in nested fields' nullability, metadata or list child names takes the table's type.
/// Written objects and the manifest then carry exactly the table's schema.
pub(super) fn conform(
    schema: &SchemaRef,
    batch: RecordBatch,
    input: &str,
    first_row: u64,
) -> Result<RecordBatch, LoadError> {
    if batch.schema_ref() == schema {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let columns = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| conform_column(field, column, input, first_row))
        .collect::<Result<Vec<_>, _>>()?;
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(LoadError::arrow(ArrowStage::ReadingInput))
}

/// One column of a batch with its field in the table's schema (see [`conform`]); `first_row`
/// is the batch's first row's 0-based number in `input`.
pub(crate) fn conform_column(
    field: &arrow::datatypes::Field,
    column: &arrow::array::ArrayRef,
    input: &str,
    first_row: u64,
) -> Result<arrow::array::ArrayRef, LoadError> {
    let bad = |problem: ColumnProblem| LoadError::Schema {
        input: input.into(),
        column: field.name().clone(),
        problem,
    };
    if !field.is_nullable()
        && let Some(row) = first_null(column.as_ref())
    {
        return Err(bad(ColumnProblem::NullInNotNull {
            row: first_row + row as u64 + 1,
        }));
    }
    if column.data_type() == field.data_type() {
        return Ok(column.clone());
    }
    let data =
        retype(column.to_data(), field.data_type()).map_err(|source| LoadError::NestedNull {
            input: input.into(),
            column: field.name().clone(),
            data_type: field.data_type().clone(),
            source,
        })?;
    Ok(arrow::array::make_array(data))
}

/// The index of an array's first null, if it holds one.
fn first_null(array: &dyn arrow::array::Array) -> Option<usize> {
    let nulls = array.nulls().filter(|n| n.null_count() > 0)?;
    (0..nulls.len()).find(|&i| nulls.is_null(i))
}

/// `data` with the type `to`, which agrees with its own (see [`ravel_manifest::types_agree`]):
/// nested children take `to`'s child types, recursively. Validation refuses a null in a child
/// that `to` says is NOT NULL.
fn retype(
    data: arrow::array::ArrayData,
    to: &arrow::datatypes::DataType,
) -> Result<arrow::array::ArrayData, arrow::error::ArrowError> {
    if data.data_type() == to {
        return Ok(data);
    }
    let targets = ravel_manifest::child_types(to);
    let children = if targets.len() == data.child_data().len() {
        data.child_data()
            .iter()
            .zip(&targets)
            .map(|(child, t)| retype(child.clone(), t))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        data.child_data().to_vec()
    };
    data.into_builder()
        .data_type(to.clone())
        .child_data(children)
        .build()
}
