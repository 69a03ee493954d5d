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
    let mut diags = Diagnostics::new();
    let mut b = Builder {
        stack: Vec::new(),
        anchors: HashMap::new(),
        docs: Vec::new(),
        nodes: 0,
        error: None,
    };
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
