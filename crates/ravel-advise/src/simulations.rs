//! Every candidate simulated on the sample: candidates of one signature share a simulation,
//! and those that put the sample in the same order share its encoding.

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::estimate::{self, Simulated};
use crate::{AdviseError, Candidate, sample};

/// Each candidate's simulation, in the candidates' order: candidates of one
/// [`estimate::Signature`] share a simulation, those that put the sample in the same order
/// share its encoding, and the distinct ones run in parallel.
pub(crate) fn simulate_all(
    candidates: &[Candidate],
    sample: &sample::Sample,
    table: &estimate::Table<'_>,
) -> Result<Vec<Arc<Simulated>>, AdviseError> {
    let ordered: Vec<(estimate::Ordered, f64)> = candidates
        .par_iter()
        .map(|c| {
            let started = Instant::now();
            let o = estimate::ordered(&sample.batch, c)?;
            Ok((o, started.elapsed().as_secs_f64()))
        })
        .collect::<Result<_, AdviseError>>()?;
    // The first candidate of each signature stands for the others.
    let first: Vec<usize> = (0..candidates.len())
        .map(|i| {
            (0..=i)
                .find(|&j| ordered[j].0.signature == ordered[i].0.signature)
                .unwrap_or(i)
        })
        .collect();
    let distinct: Vec<usize> = (0..candidates.len()).filter(|&i| first[i] == i).collect();
    // Signatures that differ only in what the manifest and the filters record, or in being
    // arrival order, share the encoding of their order.
    let same_order =
        |i: usize, j: usize| ordered[i].0.signature.same_order(&ordered[j].0.signature);
    let orders: Vec<usize> = distinct
        .iter()
        .copied()
        .filter(|&i| distinct.iter().find(|&&j| same_order(i, j)) == Some(&i))
        .collect();
    let encoded = encode_orders(&orders, &ordered, sample, table)?;
    let simulated: Vec<(usize, Arc<Simulated>)> = distinct
        .par_iter()
        .map(|&i| {
            let (_, e) = encoded
                .iter()
                .find(|(j, _)| same_order(i, *j))
                .expect("every order is encoded");
            let mut sim = estimate::simulate(e, &candidates[i], table)?;
            sim.seconds += ordered[i].1;
            Ok((i, Arc::new(sim)))
        })
        .collect::<Result<_, AdviseError>>()?;
    tracing::debug!(
        candidates = candidates.len(),
        simulations = distinct.len(),
        orders = orders.len(),
        "candidates simulated"
    );
    Ok(first
        .iter()
        .map(|f| {
            simulated
                .iter()
                .find(|(i, _)| i == f)
                .map(|(_, s)| s.clone())
                .expect("every signature's first candidate is simulated")
        })
        .collect())
}

/// The sample encoded in the order of each candidate of `orders` (indices into `ordered`),
/// in parallel, with the index of the candidate it stands for.
fn encode_orders(
    orders: &[usize],
    ordered: &[(estimate::Ordered, f64)],
    sample: &sample::Sample,
    table: &estimate::Table<'_>,
) -> Result<Vec<(usize, estimate::Encoded)>, AdviseError> {
    let seen = estimate::as_seen(&sample.batch)?;
    orders
        .par_iter()
        .map(|&i| {
            let e = estimate::encode(&sample.batch, &seen, &ordered[i].0.order, table)?;
            Ok((i, e))
        })
        .collect()
}
