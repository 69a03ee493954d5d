//! Coverage bins of the RTL tests: named counts of the cases a run drove (a parser path by a
//! verdict, a checksum's carries, an ACL prefix index), and the bins a run must hit. A test
//! counts every packet into its bins, prints them, and fails naming the bins it never hit, so
//! a generator that stops reaching a case is noticed.

use std::collections::BTreeMap;

/// Packets per bin, by name (sorted, so the printout is stable).
pub type Bins = BTreeMap<String, u64>;

/// Counts one case into bin `name`.
pub fn hit(bins: &mut Bins, name: impl Into<String>) {
    *bins.entry(name.into()).or_default() += 1;
}

/// Prints the bins with their counts to standard error under `title`.
pub fn print(bins: &Bins, title: &str) {
    eprintln!("{title}:");
    for (k, n) in bins {
        eprintln!("  {n:8}  {k}");
    }
}

/// The bins of `required` that `bins` never hit.
pub fn missing<S: AsRef<str>>(bins: &Bins, required: impl IntoIterator<Item = S>) -> Vec<String> {
    required
        .into_iter()
        .filter(|b| bins.get(b.as_ref()).copied().unwrap_or(0) == 0)
        .map(|b| b.as_ref().to_string())
        .collect()
}

/// Panics naming the bins of `required` that `bins` never hit; `context` says which run (its
/// seed), so the failure can be replayed.
pub fn assert_hit<S: AsRef<str>>(
    bins: &Bins,
    required: impl IntoIterator<Item = S>,
    what: &str,
    context: &str,
) {
    let missing = missing(bins, required);
    assert!(
        missing.is_empty(),
        "{what} never hit: {missing:#?} ({context})"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_names_the_bins_never_hit() {
        let mut b = Bins::new();
        hit(&mut b, "a");
        hit(&mut b, "a".to_string());
        assert_eq!(b["a"], 2);
        assert_eq!(missing(&b, ["a", "b"]), vec!["b".to_string()]);
        assert!(missing(&b, ["a"]).is_empty());
    }
}
