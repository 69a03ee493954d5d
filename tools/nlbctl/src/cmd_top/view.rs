//! Drawing a [`View`] with ratatui: a three-line header, then VIPs and pools side by side,
//! rules, backends per pool, and the reasons packets were counted under.

use super::model::{CounterRow, View};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use ratatui::Frame;

/// What the screen shows besides the view.
#[derive(Debug, Clone)]
pub struct Screen<'a> {
    /// The view (`None` before the first sample).
    pub view: Option<&'a View>,
    /// The admin socket.
    pub source: &'a str,
    /// Samples taken so far.
    pub samples: u64,
    /// Seconds between refreshes.
    pub refresh_secs: f64,
    /// The last sample failed: why.
    pub error: Option<&'a str>,
    /// The filter being typed (after `/`).
    pub editing: Option<&'a str>,
    /// Show the key help line.
    pub keys: bool,
}

/// A rate for a column: `-` without one; one decimal below 100 000, then k, M, G.
pub fn rate(r: Option<f64>) -> String {
    match r {
        None => "-".into(),
        Some(v) if v < 100_000.0 => format!("{v:.1}"),
        Some(v) if v < 100e6 => format!("{:.1}k", v / 1e3),
        Some(v) if v < 100e9 => format!("{:.1}M", v / 1e6),
        Some(v) => format!("{:.1}G", v / 1e9),
    }
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

fn table<'a>(title: String, header: &[&'a str], rows: Vec<Vec<String>>, widths: &[u16]) -> Table<'a> {
    let numbers = first_number(header);
    let right = |i: usize| i >= numbers;
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|r| {
            Row::new(r.into_iter().enumerate().map(|(i, c)| {
                if right(i) {
                    Cell::from(Line::from(c).right_aligned())
                } else {
                    Cell::from(c)
                }
            }))
        })
        .collect();
    let head = Row::new(header.iter().enumerate().map(|(i, h)| {
        if right(i) {
            Cell::from(Line::from(*h).right_aligned())
        } else {
            Cell::from(*h)
        }
    }))
    .style(bold());
    Table::new(rows, widths.iter().map(|w| Constraint::Length(*w)))
        .header(head)
        .block(Block::bordered().title(title))
}

/// Index of the first numeric column: the columns from there on are right-aligned.
fn first_number(header: &[&str]) -> usize {
    header
        .iter()
        .position(|h| h.ends_with("/S") || *h == "PACKETS" || *h == "MEMBERS")
        .unwrap_or(header.len())
}

fn counter_row(r: &CounterRow) -> Vec<String> {
    vec![
        r.name.to_ascii_lowercase(),
        rate(r.packets_per_sec),
        rate(r.punts_per_sec),
        rate(r.drops_per_sec),
        r.packets.to_string(),
        r.punts.to_string(),
        r.drops.to_string(),
    ]
}

/// Lines the body needs to show every row: (VIPs and pools, rules, backends, reasons).
pub fn heights(v: &View) -> [u16; 4] {
    let h = |n: usize| (n as u16).saturating_add(3);
    [
        h(v.vips.len().max(v.pools.len())),
        h(v.rules.len()),
        h(v.backends.len()),
        h(v.reasons.len()),
    ]
}

/// Draws the screen.
pub fn draw(frame: &mut Frame, s: &Screen) {
    let area = frame.area();
    let body = s.view.map_or([3; 4], heights);
    let [head, top, rules, backends, reasons] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(body[0]),
        Constraint::Length(body[1]),
        Constraint::Length(body[2]),
        Constraint::Min(body[3].min(3)),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(header(s)), head);
    let Some(v) = s.view else {
        return;
    };
    let [vips, pools] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(top);
    draw_vips(frame, v, vips);
    draw_pools(frame, v, pools);
    frame.render_widget(
        table(
            format!(" Rules ({}) ", v.rules.len()),
            &[
                "RULE", "VIP", "PROTO", "PORTS", "TARGET", "PKT/S", "BYTES/S", "PUNT/S", "DROP/S",
                "PACKETS",
            ],
            v.rules
                .iter()
                .map(|r| {
                    vec![
                        r.name.clone(),
                        r.vip.clone(),
                        r.protocol.clone(),
                        r.ports.join(","),
                        r.target.clone(),
                        rate(r.packets_per_sec),
                        rate(r.bytes_per_sec),
                        rate(r.punts_per_sec),
                        rate(r.drops_per_sec),
                        r.packets.to_string(),
                    ]
                })
                .collect(),
            &[20, 16, 5, 12, 16, 10, 12, 9, 9, 12],
        ),
        rules,
    );
    frame.render_widget(
        table(
            format!(" Backends ({}) ", v.backends.len()),
            &[
                "BACKEND", "POOL", "HEALTH", "WEIGHT", "IN TABLES", "PKT/S", "BYTES/S", "PACKETS",
            ],
            v.backends
                .iter()
                .map(|b| {
                    vec![
                        b.backend.clone(),
                        if b.pool.is_empty() {
                            "-".into()
                        } else {
                            b.pool.clone()
                        },
                        b.health.clone(),
                        if b.weight.is_empty() {
                            "-".into()
                        } else {
                            b.weight.clone()
                        },
                        match b.healthy_in_tables {
                            Some(true) => "healthy".into(),
                            Some(false) => "out".into(),
                            None => "-".into(),
                        },
                        rate(b.packets_per_sec),
                        rate(b.bytes_per_sec),
                        b.packets.to_string(),
                    ]
                })
                .collect(),
            &[20, 20, 10, 12, 10, 10, 12, 12],
        ),
        backends,
    );
    frame.render_widget(
        table(
            " Reasons (since the counters were cleared) ".into(),
            &[
                "REASON", "PKT/S", "PUNT/S", "DROP/S", "PACKETS", "PUNTS", "DROPS",
            ],
            v.reasons.iter().map(counter_row).collect(),
            &[26, 10, 9, 9, 12, 10, 10],
        ),
        reasons,
    );
}

fn draw_vips(frame: &mut Frame, v: &View, area: Rect) {
    frame.render_widget(
        table(
            format!(" VIPs ({}) ", v.vips.len()),
            &["VIP", "RULES", "PKT/S", "BYTES/S", "PACKETS"],
            v.vips
                .iter()
                .map(|x| {
                    vec![
                        x.vip.clone(),
                        x.rules.join(","),
                        rate(x.packets_per_sec),
                        rate(x.bytes_per_sec),
                        x.packets.to_string(),
                    ]
                })
                .collect(),
            &[16, 24, 10, 12, 12],
        ),
        area,
    );
}

fn draw_pools(frame: &mut Frame, v: &View, area: Rect) {
    frame.render_widget(
        table(
            format!(" Pools ({}) ", v.pools.len()),
            &["POOL", "SERVING", "MEMBERS", "HEALTHY"],
            v.pools
                .iter()
                .map(|p| {
                    vec![
                        p.name.clone(),
                        if p.failed_over {
                            format!("{} (failed over)", p.serving)
                        } else {
                            p.serving.clone()
                        },
                        p.members.to_string(),
                        p.healthy.to_string(),
                    ]
                })
                .collect(),
            &[20, 26, 8, 8],
        ),
        area,
    );
}

fn header(s: &Screen) -> Vec<Line<'static>> {
    let Some(v) = s.view else {
        return vec![
            Line::from(format!("nlbctl top · nlbd {} · waiting for the first sample", s.source))
                .style(bold()),
            Line::from(s.error.map_or_else(String::new, |e| format!("error: {e}"))),
            keys_line(s, None),
        ];
    };
    let over = v.interval_secs.map_or_else(
        || "(rates from the next one)".into(),
        |t| format!("over {t:.3} s"),
    );
    let mut first = format!(
        "sample {} {over}, every {:.1} s · nlbd {} · {} (profile {}) · generation {} (bank {}){}",
        s.samples,
        s.refresh_secs,
        s.source,
        v.device,
        v.profile,
        v.generation,
        v.active_bank,
        if v.load_pending {
            ", a failed load is retried"
        } else {
            ""
        },
    );
    if let Some(e) = s.error {
        first = format!("error: {e} (showing sample {})", s.samples);
    }
    let c = &v.connections;
    let verdict = |name: &str| {
        v.verdicts
            .iter()
            .find(|r| r.name == name)
            .map_or_else(|| "-".into(), |r| rate(r.packets_per_sec))
    };
    let second = format!(
        "connections {}/{} ({:.1}%) · new {}/s · forwarded {}/s · punted {}/s · dropped {}/s · passed {}/s",
        c.entries,
        c.capacity,
        c.occupancy_percent,
        rate(c.new_per_sec),
        verdict("FORWARD"),
        verdict("PUNT"),
        verdict("DROP"),
        verdict("PASS"),
    );
    vec![
        Line::from(first).style(bold()),
        Line::from(second),
        keys_line(s, Some(v)),
    ]
}

fn keys_line(s: &Screen, v: Option<&View>) -> Line<'static> {
    let order = v.map_or_else(String::new, |v| {
        format!(
            "sort: {} {} · ",
            v.sort.label(),
            if v.reverse { "▲" } else { "▼" }
        )
    });
    let filter = match (s.editing, v.and_then(|v| v.filter.as_deref())) {
        (Some(typed), _) => format!("filter: {typed}▏ (Enter keeps it, Esc drops it)"),
        (None, Some(f)) => format!("filter: {f}"),
        (None, None) => "filter: none".into(),
    };
    let keys = if s.keys && s.editing.is_none() {
        "   keys: s sort · p b t n sort by pkt/s bytes/s packets name · r reverse · / filter · Esc clear · q quit"
    } else {
        ""
    };
    Line::from(format!("{order}{filter}{keys}"))
}
