//! A scenario file as a tree whose every node knows where it was written, so every error names
//! `file:line:column` (the compiler's own tree is private to it; this is the same idea, small).
//!
//! Mappings also keep where they end, so an inline load-balancer configuration can be handed to
//! the compiler with its positions intact ([`blank_outside`]).

use flowtable_compiler::{Diagnostics, Pos};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Most nodes a scenario may have (aliases expanded): a scenario is small.
const MAX_NODES: usize = 1_000_000;

/// A node's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A scalar: its text and whether it was written plain (unquoted).
    Scalar {
        /// The text.
        text: String,
        /// Written without quotes.
        plain: bool,
    },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, keys in document order.
    Map(Vec<(Node, Node)>),
}

/// A value, where it starts and (for collections) where it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub value: Value,
    /// Where it starts (1-based line and column).
    pub pos: Pos,
    /// Character offset of its start.
    pub start: usize,
    /// Character offset where it ends (exclusive for block collections, the closing bracket
    /// for flow ones; the start for scalars).
    pub end: usize,
    /// Written in flow style (`{...}` / `[...]`).
    pub flow: bool,
}

impl Node {
    /// Whether this is an explicit null (`~`, `null`, or nothing).
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar { text, plain: true }
            if text.is_empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
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
    Seq(Marker, usize, Vec<Node>),
    Map(Marker, usize, Vec<(Node, Node)>, Option<Node>),
}

struct Builder<'t> {
    text: &'t [char],
    stack: Vec<Frame>,
    anchors: Vec<(usize, Node)>,
    docs: Vec<Node>,
    nodes: usize,
    error: Option<(Pos, String)>,
}

impl Builder<'_> {
    fn finish(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.push((anchor, node.clone()));
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

    fn collection(&self, start: &Marker, end: &Marker, value: Value) -> Node {
        let flow = matches!(self.text.get(start.index()), Some('{') | Some('['));
        // The parser marks a block collection where it noticed it (after its first key or
        // dash); it starts at its first item.
        let first = match &value {
            Value::Map(entries) => entries.first().map(|(k, _)| (k.pos, k.start)),
            Value::Seq(items) => items.first().map(|i| (i.pos, i.start)),
            Value::Scalar { .. } => None,
        };
        let (pos, start_index) = match first {
            Some((pos, index)) if !flow && index < start.index() => (pos, index),
            _ => (pos_of(start), start.index()),
        };
        Node {
            value,
            pos,
            start: start_index,
            end: end.index() + usize::from(flow),
            flow,
        }
    }
}

fn count(node: &Node) -> usize {
    match &node.value {
        Value::Scalar { .. } => 1,
        Value::Seq(v) => 1 + v.iter().map(count).sum::<usize>(),
        Value::Map(v) => 1 + v.iter().map(|(k, v)| count(k) + count(v)).sum::<usize>(),
    }
}

impl MarkedEventReceiver for Builder<'_> {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            self.error = Some((
                pos_of(&mark),
                format!("scenario too large (more than {MAX_NODES} nodes)"),
            ));
            return;
        }
        match ev {
            Event::Scalar(text, style, anchor, _) => {
                let plain = style == TScalarStyle::Plain;
                self.finish(
                    Node {
                        value: Value::Scalar { text, plain },
                        pos: pos_of(&mark),
                        start: mark.index(),
                        end: mark.index(),
                        flow: false,
                    },
                    anchor,
                );
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Seq(mark, anchor, Vec::new()))
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map(mark, anchor, Vec::new(), None))
            }
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Seq(start, anchor, items)) => {
                    let node = self.collection(&start, &mark, Value::Seq(items));
                    self.finish(node, anchor)
                }
                Some(Frame::Map(start, anchor, entries, _)) => {
                    let node = self.collection(&start, &mark, Value::Map(entries));
                    self.finish(node, anchor)
                }
                None => self.error = Some((pos_of(&mark), "unbalanced document".into())),
            },
            Event::Alias(id) => match self.anchors.iter().rev().find(|(a, _)| *a == id) {
                Some((_, node)) => {
                    let node = node.clone();
                    self.nodes += count(&node);
                    self.finish(
                        Node {
                            pos: pos_of(&mark),
                            ..node
                        },
                        0,
                    )
                }
                None => self.error = Some((pos_of(&mark), "alias to an unknown anchor".into())),
            },
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

/// Parses one YAML document (an empty file is an empty mapping).
pub fn parse(file: &str, text: &str) -> Result<Node, Diagnostics> {
    let chars: Vec<char> = text.chars().collect();
    let mut diags = Diagnostics::new();
    let mut b = Builder {
        text: &chars,
        stack: Vec::new(),
        anchors: Vec::new(),
        docs: Vec::new(),
        nodes: 0,
        error: None,
    };
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut b, true) {
        diags.push(
            file,
            pos_of(e.marker()),
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
    if b.docs.len() > 1 {
        diags.push(
            file,
            b.docs[1].pos,
            "",
            "the scenario holds several YAML documents; put everything in one",
            None,
        );
        return Err(diags);
    }
    Ok(b.docs.pop().unwrap_or(Node {
        value: Value::Map(Vec::new()),
        pos: Pos::new(1, 1),
        start: 0,
        end: 0,
        flow: false,
    }))
}

/// `text` with every character outside `node` replaced by a space (line breaks kept): the
/// node alone, at the same lines and columns, so a parser of the node's text reports
/// positions in the original file.
pub fn blank_outside(text: &str, node: &Node) -> String {
    text.chars()
        .enumerate()
        .map(|(i, c)| {
            if c == '\n' || c == '\r' || (node.start..node.end).contains(&i) {
                c
            } else {
                ' '
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(n: &Node) -> &[(Node, Node)] {
        match &n.value {
            Value::Map(m) => m,
            _ => panic!("{n:?}"),
        }
    }

    #[test]
    fn positions_are_one_based_and_block_mappings_end_where_the_next_key_starts() {
        let text = "a: 1\nconfig:\n  nic: {zone: r1-a}\n  x: [1, 2]\n# tail\nseed: 3\n";
        let doc = parse("s.yaml", text).unwrap();
        let top = map(&doc);
        assert_eq!(top[1].0.pos, Pos::new(2, 1));
        let config = &top[1].1;
        assert_eq!(config.pos, Pos::new(3, 3));
        let kept = blank_outside(text, config);
        assert_eq!(kept.lines().count(), text.lines().count());
        assert_eq!(
            kept.lines().nth(2).unwrap().trim_end(),
            "  nic: {zone: r1-a}"
        );
        assert!(!kept.contains("seed") && !kept.contains("a: 1") && !kept.contains("config"));
        // The kept text is the mapping alone, at its own positions.
        let again = parse("s.yaml", &kept).unwrap();
        assert_eq!(map(&again)[0].0.pos, Pos::new(3, 3));
        assert_eq!(map(&again).len(), 2);
    }

    #[test]
    fn flow_collections_keep_their_closing_bracket() {
        let text = "config: {nic: {zone: r1-a}}\nseed: 1\n";
        let doc = parse("s.yaml", text).unwrap();
        let config = &map(&doc)[0].1;
        assert!(config.flow);
        let kept = blank_outside(text, config);
        assert_eq!(kept.lines().next().unwrap().trim(), "{nic: {zone: r1-a}}");
    }

    #[test]
    fn bad_yaml_is_a_positioned_error() {
        let e = parse("s.yaml", "a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.0[0].pos.line >= 1, "{e}");
        assert!(e.to_string().starts_with("s.yaml:"), "{e}");
    }
}
