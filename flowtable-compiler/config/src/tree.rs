//! A YAML/JSON document as a tree whose every node knows its position.
//!
//! serde's derive loses positions, but every diagnostic must name `file:line:column`, so
//! documents are read into this small tree first (YAML 1.2 via `yaml-rust2`; JSON is checked
//! with `serde_json` for strict syntax and then read by the same YAML 1.2 parser, of which it is
//! a subset) and the model is built from the tree.

use crate::diag::{Diagnostics, Pos};
use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Most nodes a document may expand to (alias expansion included), against "billion laughs".
const MAX_NODES: usize = 4_000_000;

/// A node's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// A scalar: its text and whether it was written plain (unquoted).
    Scalar { text: String, plain: bool },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping: keys in document order.
    Map(Vec<(Node, Node)>),
}

/// A value and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub value: Value,
    pub pos: Pos,
}

impl Node {
    /// Whether this is an explicit null (`~`, `null`, or nothing).
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true }
            if text.is_empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
    }

    /// The scalar text, if this is a scalar.
    pub fn scalar(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// What kind of node this is, for "expected X, found Y" messages.
    pub fn kind(&self) -> &'static str {
        match &self.value {
            _ if self.is_null() => "null",
            Value::Scalar { .. } => "a scalar",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

fn pos_of(m: &Marker) -> Pos {
    // yaml-rust2 markers: line 1-based, column 0-based.
    Pos::new(m.line() as u32, m.col() as u32 + 1)
}

enum Frame {
    Seq(Pos, usize, Vec<Node>),
    Map(Pos, usize, Vec<(Node, Node)>, Option<Node>),
}

struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    docs: Vec<Node>,
    nodes: usize,
    error: Option<(Pos, String)>,
}

fn count(node: &Node) -> usize {
    match &node.value {
        Value::Scalar { .. } => 1,
        Value::Seq(v) => 1 + v.iter().map(count).sum::<usize>(),
        Value::Map(v) => 1 + v.iter().map(|(k, v)| count(k) + count(v)).sum::<usize>(),
    }
}

impl Builder {
    fn new() -> Builder {
        Builder {
            stack: Vec::new(),
            anchors: HashMap::new(),
            docs: Vec::new(),
            nodes: 0,
            error: None,
        }
    }

    fn finish(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq(_, _, items)) => items.push(node),
            Some(Frame::Map(_, _, entries, key)) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        let pos = pos_of(&mark);
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            self.error = Some((
                pos,
                format!("document too large (more than {MAX_NODES} nodes)"),
            ));
            return;
        }
        match ev {
            Event::Scalar(text, style, anchor, _) => {
                let plain = style == TScalarStyle::Plain;
                self.finish(
                    Node {
                        value: Value::Scalar { text, plain },
                        pos,
                    },
                    anchor,
                );
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Frame::Seq(pos, anchor, Vec::new())),
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map(pos, anchor, Vec::new(), None))
            }
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Seq(p, anchor, items)) => self.finish(
                    Node {
                        value: Value::Seq(items),
                        pos: p,
                    },
                    anchor,
                ),
                Some(Frame::Map(p, anchor, entries, _)) => self.finish(
                    Node {
                        value: Value::Map(entries),
                        pos: p,
                    },
                    anchor,
                ),
                None => self.error = Some((pos, "unbalanced document".into())),
            },
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(node) => {
                    self.nodes += count(&node);
                    if self.nodes > MAX_NODES {
                        self.error = Some((
                            pos,
                            format!("document too large (more than {MAX_NODES} nodes)"),
                        ));
                        return;
                    }
                    self.finish(Node { pos, ..node }, 0)
                }
                None => self.error = Some((pos, "alias to an unknown anchor".into())),
            },
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

/// Whether a file is to be read as JSON: by its name, or by its first character (`{`, or `[`
/// for the array `gcloud ... list --format=json` prints).
fn looks_like_json(file: &str, text: &str) -> bool {
    file.to_ascii_lowercase().ends_with(".json") || text.trim_start().starts_with(['{', '['])
}

/// Parses a YAML or JSON document. An empty document is an empty mapping; a YAML stream of
/// several documents is refused (see [`parse_stream`]).
pub(crate) fn parse(file: &str, text: &str) -> Result<Node, Diagnostics> {
    let mut docs = parse_stream(file, text)?;
    if docs.len() > 1 {
        let mut diags = Diagnostics::new();
        diags.push(
            file,
            docs[1].pos,
            "",
            "the file holds several YAML documents; put everything in one",
            None,
        );
        return Err(diags);
    }
    Ok(docs.pop().unwrap_or(Node {
        value: Value::Map(Vec::new()),
        pos: Pos::new(1, 1),
    }))
}

/// Parses a YAML stream (one or more documents, as several `gcloud ... describe` outputs
/// concatenated with `---`) or a JSON value, keeping positions in the coordinates of the whole
/// file. An empty file is no document at all.
pub(crate) fn parse_stream(file: &str, text: &str) -> Result<Vec<Node>, Diagnostics> {
    let mut diags = Diagnostics::new();
    if looks_like_json(file, text) {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
            let msg = strip_json_position(&e.to_string());
            let trailing = msg.starts_with("trailing characters");
            // A YAML stream whose first document is JSON (JSON is YAML) reads as YAML.
            if trailing && !file.to_ascii_lowercase().ends_with(".json") {
                if let Ok(docs) = parse_yaml(file, text) {
                    return Ok(docs);
                }
            }
            let msg = if trailing {
                "invalid JSON: a second value follows the first; put several resources in one \
                 array `[...]`, or write YAML documents separated by `---`"
                    .to_string()
            } else {
                format!("invalid JSON: {msg}")
            };
            diags.push(
                file,
                Pos::new(e.line() as u32, e.column() as u32),
                "",
                msg,
                None,
            );
            return Err(diags);
        }
    }
    parse_yaml(file, text)
}

/// The YAML 1.2 reading of [`parse_stream`].
fn parse_yaml(file: &str, text: &str) -> Result<Vec<Node>, Diagnostics> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if text.len() >= PARALLEL_LIST_BYTES && threads > 1 {
        if let Some(docs) = parse_list_in_parallel(text, threads) {
            return Ok(docs);
        }
    }
    parse_yaml_whole(file, text)
}

/// [`parse_yaml`] in one piece, on one thread.
fn parse_yaml_whole(file: &str, text: &str) -> Result<Vec<Node>, Diagnostics> {
    let mut diags = Diagnostics::new();
    let mut b = Builder::new();
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut b, true) {
        let m = e.marker();
        diags.push(
            file,
            pos_of(m),
            "",
            format!("invalid YAML: {}", e.info()),
            None,
        );
        return Err(diags);
    }
    if let Some((pos, msg)) = b.error {
        diags.push(file, pos, "", format!("invalid YAML: {msg}"), None);
        return Err(diags);
    }
    Ok(b.docs)
}

/// Streams at least this large that are one `kubectl get -o yaml` list are parsed on several
/// threads ([`parse_list_in_parallel`]); below it, threads would cost more than they save.
const PARALLEL_LIST_BYTES: usize = 1 << 20;

/// Parses `text` as one YAML document, giving its nodes and how many nodes [`MAX_NODES`]
/// counts; none when it is invalid or not one document.
fn load_one(text: &str) -> Option<(Node, usize)> {
    let mut b = Builder::new();
    Parser::new_from_str(text).load(&mut b, true).ok()?;
    if b.error.is_some() || b.docs.len() != 1 {
        return None;
    }
    let doc = b.docs.pop()?;
    Some((doc, b.nodes))
}

/// Moves every position of a tree `lines` lines down.
fn shift_lines(node: &mut Node, lines: u32) {
    node.pos.line += lines;
    match &mut node.value {
        Value::Scalar { .. } => {}
        Value::Seq(items) => items.iter_mut().for_each(|n| shift_lines(n, lines)),
        Value::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
            shift_lines(k, lines);
            shift_lines(v, lines);
        }),
    }
}

/// The tree of a large `kind: List` document as `kubectl get -o yaml` prints it (a top-level
/// `items:` whose entries start with `- ` at column 0), parsed on `threads` threads: the
/// entries are cut into runs at their `- ` lines, each run is parsed as a sequence
/// of its own, and the rest of the document with the entries' lines left blank. Cutting at a
/// line that starts an entry of the top-level block sequence splits no YAML construct that
/// could go on across it (block scalars and plain continuation lines are indented; a quoted
/// or flow value cut in two leaves a run that does not parse), and a run that does not parse
/// alone (an alias to another run's anchor, for one) gives none: the caller then parses the
/// whole text as one, with its diagnostics. The tree is the one parsing the whole text gives,
/// positions included (tests compare them).
fn parse_list_in_parallel(text: &str, threads: usize) -> Option<Vec<Node>> {
    // Column-0 lines: where `items:` is, where its entries start and where they end.
    let mut items_line = None; // (byte offset after the line, its line number, 1-based)
    let mut starts: Vec<usize> = Vec::new();
    let mut end = None;
    let mut at = 0;
    let mut line = 0u32;
    for l in text.split_inclusive('\n') {
        let here = at;
        at += l.len();
        line += 1;
        let first = l.as_bytes()[0];
        if matches!(first, b' ' | b'\t' | b'\n' | b'\r' | b'#') {
            continue;
        }
        // Another document, a directive or a tab-indented line: not the simple shape.
        if l.starts_with("---") || l.starts_with("...") || first == b'%' {
            return None;
        }
        let entry = l.starts_with("- ") || l.trim_end() == "-";
        match (items_line, end) {
            (None, _) if entry => return None,
            (None, _) if l.trim_end() == "items:" => items_line = Some((at, line)),
            (None, _) => {}
            (Some(_), None) if entry => starts.push(here),
            (Some(_), None) => end = Some(here),
            (Some(_), Some(_)) if entry => return None,
            (Some(_), Some(_)) => {}
        }
    }
    let (head_end, items_line) = items_line?;
    if starts.first() != Some(&head_end) {
        return None;
    }
    let end = end.unwrap_or(text.len());
    // Runs of entries of about equal size, one per thread.
    let mut cuts = vec![head_end];
    for k in 1..threads {
        let want = head_end + (end - head_end) * k / threads;
        let i = starts.partition_point(|&s| s < want);
        if let Some(&s) = starts.get(i) {
            if s > *cuts.last()? && s < end {
                cuts.push(s);
            }
        }
    }
    cuts.push(end);
    let newlines = |a: usize, b: usize| text.as_bytes()[a..b].iter().filter(|&&c| c == b'\n');
    let mut offsets = vec![0u32; cuts.len() - 1];
    offsets[0] = newlines(0, cuts[0]).count() as u32;
    for k in 1..offsets.len() {
        offsets[k] = offsets[k - 1] + newlines(cuts[k - 1], cuts[k]).count() as u32;
    }
    // The document without its entries, their lines left blank (positions stay).
    let blank = newlines(head_end, end).count();
    let mut rest = String::with_capacity(head_end + blank + text.len() - end);
    rest.push_str(&text[..head_end]);
    rest.push_str(&"\n".repeat(blank));
    rest.push_str(&text[end..]);

    let (runs, rest, seq_pos) = std::thread::scope(|scope| {
        let workers: Vec<_> = (1..cuts.len() - 1)
            .map(|k| {
                let run = &text[cuts[k]..cuts[k + 1]];
                scope.spawn(move || load_one(run))
            })
            .collect();
        let mut runs = vec![load_one(&text[cuts[0]..cuts[1]])];
        let rest = load_one(&rest);
        // Where the whole reading puts the (indentless) sequence of the entries: read from
        // the document up to its first entry's end, a parse of a few lines.
        let first = load_one(&text[..starts.get(1).copied().unwrap_or(end)]);
        let seq_pos = first.and_then(|(doc, _)| match doc.value {
            Value::Map(entries) => entries
                .into_iter()
                .find(|(k, _)| k.scalar() == Some("items") && k.pos.line == items_line)
                .map(|(_, v)| v.pos),
            _ => None,
        });
        for w in workers {
            runs.push(
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        (runs, rest, seq_pos)
    });
    let (mut doc, mut nodes) = rest?;
    let mut items = Vec::new();
    for (run, lines) in runs.into_iter().zip(offsets) {
        let (mut run, n) = run?;
        nodes += n;
        shift_lines(&mut run, lines);
        let Value::Seq(entries) = run.value else {
            return None;
        };
        items.extend(entries);
    }
    // Each part counted its stream and document events: well within the bound, or the
    // sequential reading decides.
    if nodes + 8 * cuts.len() >= MAX_NODES {
        return None;
    }
    let Value::Map(entries) = &mut doc.value else {
        return None;
    };
    let slot = entries
        .iter_mut()
        .find(|(k, _)| k.scalar() == Some("items") && k.pos.line == items_line)
        .map(|(_, v)| v)
        .filter(|v| v.is_null())?;
    *slot = Node {
        value: Value::Seq(items),
        pos: seq_pos?,
    };
    Some(vec![doc])
}

fn strip_json_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let doc = parse("t.yaml", "a:\n  b: [1, x]\n").unwrap();
        let Value::Map(top) = &doc.value else {
            panic!("{doc:?}")
        };
        assert_eq!(top[0].0.pos, Pos::new(1, 1));
        let Value::Map(inner) = &top[0].1.value else {
            panic!()
        };
        assert_eq!(inner[0].0.pos, Pos::new(2, 3));
        let Value::Seq(items) = &inner[0].1.value else {
            panic!()
        };
        assert_eq!(items[1].pos, Pos::new(2, 10));
        assert_eq!(items[1].scalar(), Some("x"));
    }

    #[test]
    fn json_positions_and_errors() {
        let doc = parse("t.json", "{\n  \"a\": \"b\"\n}").unwrap();
        let Value::Map(top) = &doc.value else {
            panic!()
        };
        assert_eq!(top[0].1.pos, Pos::new(2, 8));
        let err = parse("t.json", "{\n  \"a\": \"b\",\n}").unwrap_err();
        assert_eq!(err.0[0].pos.line, 3, "{err}");
    }

    #[test]
    fn yaml_syntax_error_has_position() {
        let err = parse("t.yaml", "a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.to_string().starts_with("t.yaml:"), "{err}");
    }

    #[test]
    fn stream_positions_count_lines_of_the_whole_file() {
        let docs = parse_stream(
            "t.yaml",
            "a: 1\n---\nb: 2\n---\n# only a comment\n---\nc:\n  d: x\n",
        )
        .unwrap();
        // The comment-only document is an empty (null) document.
        assert_eq!(docs.len(), 4, "{docs:?}");
        let Value::Map(third) = &docs[3].value else {
            panic!("{docs:?}")
        };
        assert_eq!(third[0].0.pos, Pos::new(7, 1));
        let Value::Map(inner) = &third[0].1.value else {
            panic!()
        };
        assert_eq!(inner[0].1.pos, Pos::new(8, 6));
        assert!(parse("t.yaml", "a: 1\n---\nb: 2\n").is_err());
        assert!(parse_stream("t.yaml", "").unwrap().is_empty());
    }

    #[test]
    fn json_arrays_and_concatenated_values() {
        let docs = parse_stream("t.json", "[{\"a\": 1},\n {\"b\": 2}]").unwrap();
        assert!(matches!(&docs[0].value, Value::Seq(v) if v.len() == 2));
        let err = parse_stream("t.json", "{\"a\": 1}\n{\"b\": 2}\n").unwrap_err();
        assert!(err.to_string().contains("one array"), "{err}");
    }

    #[test]
    fn lists_parse_in_parallel_as_in_one_piece() {
        // Entries with what could go wrong at a cut: comments at column 0, block scalars,
        // multi-line quoted and plain values, flow collections, an anchor used in its own
        // entry, nested sequences, CRLF lines, keys after `items:`.
        let mut text = String::from("apiVersion: v1\n# a comment\nitems:\n");
        for i in 0..40 {
            text.push_str(&format!(
                "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: node-{i}\n    labels: {{a: b, c: [1, 2]}}\n"
            ));
            match i % 5 {
                0 => {
                    text.push_str("  script: |\n    - not an entry\n    x: y\n# between entries\n")
                }
                1 => text.push_str("  note: \"two\n    lines\"\n  plain: one\n    two\n"),
                2 => text.push_str("  base: &b {x: 1}\n  copy: *b\r\n  list:\n  - p\n  - - q\n"),
                3 => text.push_str("  empty:\n  other: ~\n\n\n"),
                _ => text.push_str(
                    "  status:\n    conditions:\n    - type: Ready\n      status: \"True\"\n",
                ),
            }
        }
        text.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
        let whole = parse_yaml_whole("t.yaml", &text).unwrap();
        for threads in [2, 3, 7, 64] {
            let parallel = parse_list_in_parallel(&text, threads);
            assert_eq!(parallel.as_ref(), Some(&whole), "{threads} threads");
        }
        // The entries last in the document, and one entry only.
        let last = "kind: List\nitems:\n- a: 1\n- b: [2,\n   3]\n- c\n";
        let whole = parse_yaml_whole("t.yaml", last).unwrap();
        assert_eq!(parse_list_in_parallel(last, 2), Some(whole));
        let one = "items:\n- a: 1\n";
        let whole = parse_yaml_whole("t.yaml", one).unwrap();
        assert_eq!(parse_list_in_parallel(one, 2), Some(whole));
    }

    #[test]
    fn lists_that_do_not_split_are_parsed_in_one_piece() {
        // An alias to another entry's anchor, a quoted value cut by a line that looks like an
        // entry, several documents, an indented sequence, entries after other keys: no
        // parallel reading, and parse_yaml gives what one piece gives (a tree or the error).
        let cases = [
            "items:\n- a: &x 1\n- b: 2\n- c: 3\n- d: *x\n",
            "items:\n- a: \"one\n- two\"\n- b: 2\n- c: 3\n",
            "items:\n- a: 1\n- b: 2\n---\nitems:\n- c: 3\n",
            "items:\n  - a: 1\n  - b: 2\n",
            "items:\n- a: 1\nmore:\n- b: 2\n",
            "items:\n- a: [1,\n- 2]\n- b: 2\n",
        ];
        for text in cases {
            assert_eq!(parse_list_in_parallel(text, 2), None, "{text}");
            let whole = parse_yaml_whole("t.yaml", text);
            assert_eq!(parse_yaml("t.yaml", text), whole, "{text}");
        }
    }

    #[test]
    fn alias_bomb_is_refused() {
        let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for c in 'b'..='j' {
            s.push_str(&format!(
                "{c}: &{c} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
            prev = c;
        }
        assert!(parse("t.yaml", &s).is_err());
    }
}
