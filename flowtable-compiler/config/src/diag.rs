//! Diagnostics: what is wrong with a configuration, where, and what would be valid.

use std::fmt;

/// A position in a source file, 1-based. Line 0 means "the file as a whole".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Line, 1-based.
    pub line: u32,
    /// Column, 1-based.
    pub column: u32,
}

impl Pos {
    /// A position.
    pub fn new(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }
}

/// One problem found in an input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file, as the user named it.
    pub file: String,
    /// Where in the file.
    pub pos: Pos,
    /// The field path, such as `forwardingRules[2].portRange` (empty for the whole file).
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// What would be valid, when that can be said briefly.
    pub valid: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.pos.line, self.pos.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)?;
        if let Some(v) = &self.valid {
            write!(f, " (valid: {v})")?;
        }
        Ok(())
    }
}

/// Every problem found in one pass, sorted by position.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// No problems.
    pub fn new() -> Diagnostics {
        Diagnostics(Vec::new())
    }

    /// Records a problem.
    pub fn push(
        &mut self,
        file: &str,
        pos: Pos,
        path: impl Into<String>,
        message: impl Into<String>,
        valid: Option<String>,
    ) {
        self.0.push(Diagnostic {
            file: file.to_string(),
            pos,
            path: path.into(),
            message: message.into(),
            valid,
        });
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of problems.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The problems.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    /// Adds all problems of `other`.
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    /// Sorts by file, position and path, and drops exact repeats.
    pub fn sort(&mut self) {
        self.0.sort_by(|a, b| {
            (&a.file, a.pos, &a.path, &a.message).cmp(&(&b.file, b.pos, &b.path, &b.message))
        });
        self.0.dedup();
    }

    /// `Ok(())` when empty, otherwise the sorted problems.
    pub fn into_result(mut self) -> Result<(), Diagnostics> {
        if self.is_empty() {
            Ok(())
        } else {
            self.sort();
            Err(self)
        }
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// Edit distance between two short strings, counting a swap of neighbours as one edit
/// (optimal string alignment), for "did you mean".
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

/// The closest candidate to `word`, if one is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    if let Some(c) = candidates.iter().find(|c| c.to_ascii_lowercase() == lower) {
        return Some(c);
    }
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (edit_distance(&lower, &c.to_ascii_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_hand_worked() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("wbe", "web"), 1);
        assert_eq!(edit_distance("portRange", "portRange"), 0);
        assert_eq!(
            did_you_mean("portrange", &["portRange", "target"]),
            Some("portRange")
        );
        assert_eq!(
            did_you_mean("tagret", &["portRange", "target"]),
            Some("target")
        );
        assert_eq!(did_you_mean("zzz", &["portRange", "target"]), None);
    }

    #[test]
    fn display_format() {
        let mut d = Diagnostics::new();
        d.push("c.yaml", Pos::new(3, 5), "a.b", "bad", Some("x, y".into()));
        d.push("c.yaml", Pos::new(1, 1), "", "worse", None);
        let r = d.into_result().unwrap_err();
        assert_eq!(
            r.to_string(),
            "c.yaml:1:1: worse\nc.yaml:3:5: a.b: bad (valid: x, y)"
        );
    }
}
