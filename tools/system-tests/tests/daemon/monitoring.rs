//! The monitoring files in deploy/ checked by a real Prometheus against a real nlbd.
//!
//! `promtool` checks the scrape configuration and the alerting rules and runs the rules' unit
//! tests (deploy/prometheus/nlb-alerts.test.yml). Then nlbd runs against a simulated NIC with
//! HTTP health-check backends on loopback, a Prometheus started with deploy's configuration
//! (pointed at that nlbd, 1 s intervals) scrapes it, and through Prometheus' HTTP API:
//! every series selector of every dashboard panel, of the dashboard's variable and of every
//! alerting rule (taken out of the files by parsing their PromQL, so the check follows the
//! files) selects series with samples; every expression evaluates; every rule evaluates
//! without error; and the alerts that the lab's state calls for (a pool at its failover
//! threshold, failed over) are the ones pending.
//!
//! Needs Debian's `prometheus` package (./test.sh installs it; without it the test skips,
//! unless CI is set).

use nlb_system_tests::harness;

use harness::{have, hc_port, tcp, udp, Backend, Nic, Nlbd};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn deploy(path: &str) -> PathBuf {
    nlb_system_tests::bins::workspace()
        .join("deploy")
        .join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// --- PromQL: the series selectors of an expression ------------------------------------------

/// One series selector: a metric name and its label matchers as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Selector {
    metric: String,
    matchers: String,
}

impl Selector {
    /// The selector as PromQL, Grafana variables replaced by what matches every value.
    fn query(&self) -> String {
        format!("{}{{{}}}", self.metric, grafana(&self.matchers))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// A string literal (its text with quotes).
    Str(String),
    /// A number or a duration (`5m`, `0.99`).
    Number,
    /// `{...}`: label matchers, as written between the braces.
    Braces(String),
    /// `[...]`: a range or subquery, skipped.
    Range,
    Punct(char),
}

fn lex(expr: &str) -> Vec<Token> {
    let c: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    // The end of a bracketed group starting at `i`, strings inside skipped.
    let close = |mut i: usize, open: char, shut: char| -> usize {
        let mut depth = 0;
        while i < c.len() {
            match c[i] {
                q @ ('"' | '\'' | '`') => {
                    i += 1;
                    while i < c.len() && c[i] != q {
                        i += if c[i] == '\\' { 2 } else { 1 };
                    }
                }
                x if x == open => depth += 1,
                x if x == shut => {
                    depth -= 1;
                    if depth == 0 {
                        return i;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        panic!("unbalanced `{open}` in `{expr}`");
    };
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '#' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch.is_ascii_alphabetic() || ch == '_' || ch == ':' {
            let s = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_' || c[i] == ':') {
                i += 1;
            }
            out.push(Token::Ident(c[s..i].iter().collect()));
        } else if ch.is_ascii_digit() || ch == '.' {
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
                i += 1;
            }
            out.push(Token::Number);
        } else if matches!(ch, '"' | '\'' | '`') {
            let s = i;
            i += 1;
            while i < c.len() && c[i] != ch {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(Token::Str(c[s..i.min(c.len())].iter().collect()));
        } else if ch == '{' {
            let e = close(i, '{', '}');
            out.push(Token::Braces(c[i + 1..e].iter().collect()));
            i = e + 1;
        } else if ch == '[' {
            i = close(i, '[', ']') + 1;
            out.push(Token::Range);
        } else if ch == '$' {
            // A Grafana variable outside a string: `$x` or `${x}`.
            i += 1;
            if c.get(i) == Some(&'{') {
                i = close(i, '{', '}') + 1;
            } else {
                while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
            out.push(Token::Number);
        } else {
            out.push(Token::Punct(ch));
            i += 1;
        }
    }
    out
}

/// Keywords, operators and aggregations: never metric names.
const KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "atan2",
    "inf",
    "nan",
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];

/// Keywords followed by a parenthesised list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The series selectors of a PromQL expression.
fn selectors(expr: &str) -> Vec<Selector> {
    let tokens = lex(expr);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            // Skip the `( label, ... )` after `by`, `on`, ...
            Token::Ident(word)
                if LABEL_LISTS.contains(&word.as_str())
                    && tokens.get(i + 1) == Some(&Token::Punct('(')) =>
            {
                i += 2;
                while i < tokens.len() && tokens[i] != Token::Punct(')') {
                    i += 1;
                }
            }
            Token::Ident(word) if KEYWORDS.contains(&word.as_str()) => {}
            Token::Ident(word) => {
                match tokens.get(i + 1) {
                    // A function call.
                    Some(Token::Punct('(')) => {}
                    Some(Token::Braces(m)) => {
                        out.push(Selector {
                            metric: word.clone(),
                            matchers: m.trim().to_string(),
                        });
                        i += 1;
                    }
                    _ => out.push(Selector {
                        metric: word.clone(),
                        matchers: String::new(),
                    }),
                }
            }
            Token::Braces(m) => panic!("a selector without a metric name (`{{{m}}}`) in `{expr}`"),
            _ => {}
        }
        i += 1;
    }
    out
}

/// Grafana's variables replaced for a query to Prometheus: `$instance` by everything,
/// the interval variables by durations.
fn grafana(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "1s")
        .replace("$__range", "5m")
        .replace("$instance", ".*")
}

#[test]
fn the_promql_reader_finds_selectors_and_nothing_else() {
    let s = |e: &str| -> Vec<String> { selectors(e).iter().map(|s| s.query()).collect() };
    assert_eq!(
        s(
            r#"sum by (rule) (rate(nlb_rule_packets_total{instance=~"$instance"}[$__rate_interval])) > 0"#
        ),
        [r#"nlb_rule_packets_total{instance=~".*"}"#]
    );
    assert_eq!(
        s("count by (fleet) (count by (fleet, config_digest) (nlbd_info)) > 1"),
        ["nlbd_info{}"]
    );
    assert_eq!(
        s(
            r#"a{x="}"} > 4 * sum by (i) (rate(b[1h] offset 5m)) and on (pool) c unless histogram_quantile(0.99, d_bucket{le!="+Inf"})"#
        ),
        [r#"a{x="}"}"#, "b{}", "c{}", r#"d_bucket{le!="+Inf"}"#]
    );
    assert_eq!(s("up{job=\"nlbd\"} == 0"), ["up{job=\"nlbd\"}"]);
}

// --- Prometheus' HTTP API -------------------------------------------------------------------

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET `path` (HTTP/1.0: the body ends with the connection); the status code and the body.
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// `/api/v1/query` at the current time: the answer's `data`, or the error Prometheus gave.
fn query(addr: &str, promql: &str) -> Result<serde_json::Value, String> {
    let (_, body) = get(addr, &format!("/api/v1/query?query={}", encode(promql)))
        .ok_or_else(|| format!("no answer from Prometheus for `{promql}`"))?;
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if v["status"] == "success" {
        Ok(v["data"].clone())
    } else {
        Err(format!("{}: {}", v["errorType"], v["error"]))
    }
}

/// A Prometheus child, killed on drop.
struct Prometheus {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(dir: &Path, config: &Path) -> Prometheus {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("prometheus starts");
        let p = Prometheus { child, addr, log };
        p.wait_for("Prometheus ready", || {
            (get(&p.addr, "/-/ready")?.0 == 200).then_some(())
        });
        p
    }

    fn wait_for<T>(&self, what: &str, f: impl FnMut() -> Option<T>) -> T {
        harness::poll(what, Duration::from_millis(100), f, || {
            format!("prometheus log:\n{}", read(&self.log))
        })
    }
}

// --- the dashboard --------------------------------------------------------------------------

/// Every panel of the dashboard, those inside collapsed rows too.
fn panels(dashboard: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        out.push(p.clone());
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner.iter().cloned());
        }
    }
    out
}

/// What Grafana needs to import the dashboard: an input for the data source that every panel
/// and target uses, unique panel ids, panels on the 24-column grid without overlaps, a query in
/// every target.
fn check_dashboard(d: &serde_json::Value) {
    assert_eq!(d["uid"], "nlb-offload");
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(d["schemaVersion"].as_u64().is_some());
    let input = d["__inputs"][0]["name"].as_str().expect("__inputs");
    assert_eq!(d["__inputs"][0]["pluginId"], "prometheus");
    let ds = format!("${{{input}}}");
    let mut ids = BTreeSet::new();
    let mut cells: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for p in panels(d) {
        let title = p["title"].as_str().unwrap_or_default().to_string();
        assert!(
            ids.insert(p["id"].as_u64().expect("panel id")),
            "id of {title}"
        );
        let g = &p["gridPos"];
        let (x, y, w, h) = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(x + w <= 24 && w > 0 && h > 0, "{title}: {g}");
        for cx in x..x + w {
            for cy in y..y + h {
                if let Some(other) = cells.insert((cx, cy), title.clone()) {
                    panic!("`{title}` overlaps `{other}` at ({cx}, {cy})");
                }
            }
        }
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], ds, "{title}");
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("{title}"));
        assert!(!targets.is_empty(), "{title} has no query");
        let mut refs = BTreeSet::new();
        for t in targets {
            assert_eq!(t["datasource"]["uid"], ds, "{title}");
            assert!(
                refs.insert(t["refId"].as_str().unwrap().to_string()),
                "{title}"
            );
            assert!(
                t["expr"].as_str().is_some_and(|e| !e.trim().is_empty()),
                "{title}"
            );
        }
    }
}

/// Every PromQL expression of the dashboard (by panel title) and the metric of its variable
/// queries (`label_values(metric, label)`).
fn dashboard_queries(d: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                format!("panel `{}`", p["title"].as_str().unwrap_or_default()),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        let q = v["query"]["query"]
            .as_str()
            .or_else(|| v["query"].as_str())
            .unwrap_or_default();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {}: `{q}` is not label_values(...)", v["name"]));
        let (metric, label) = inner.rsplit_once(',').expect("label_values(metric, label)");
        assert!(!label.trim().is_empty());
        out.push((
            format!("variable `{}`", v["name"]),
            metric.trim().to_string(),
        ));
    }
    out
}

/// Every alerting rule's expression, by alert name.
fn rule_queries(rules: &str) -> Vec<(String, String)> {
    let docs = yaml_rust2::YamlLoader::load_from_str(rules).expect("rules YAML");
    let mut out = Vec::new();
    for g in docs[0]["groups"].as_vec().expect("groups") {
        for r in g["rules"].as_vec().expect("rules") {
            let name = r["alert"]
                .as_str()
                .or_else(|| r["record"].as_str())
                .expect("alert or record");
            out.push((
                format!("rule `{name}`"),
                r["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

// --- the lab --------------------------------------------------------------------------------

/// `web`: three backends with a check and the backup `spare` (failoverRatio 0.5); only b1
/// answers its checks, so 1 of 3 ≤ 0.5 × 3 and `spare` (s1 answers) serves. `dns`: two
/// backends without a check.
fn config_text(port: u16) -> String {
    format!(
        "
forwardingRules:
  - {{name: web, IPAddress: 203.0.113.80, IPProtocol: TCP, portRange: '80', target: web}}
  - {{name: dns, IPAddress: 203.0.113.53, IPProtocol: UDP, portRange: '53', target: dns}}
targetPools:
  - {{name: web, region: r, instances: [b1, b2, b3], healthChecks: [hc], backupPool: spare, failoverRatio: 0.5}}
  - {{name: spare, region: r, instances: [s1], healthChecks: [hc]}}
  - {{name: dns, region: r, instances: [d1, d2]}}
instances:
  - {{name: b1, ip: 127.0.85.1, zone: z, mac: '02:00:00:00:77:01'}}
  - {{name: b2, ip: 127.0.85.2, zone: z, mac: '02:00:00:00:77:02'}}
  - {{name: b3, ip: 127.0.85.3, zone: z, mac: '02:00:00:00:77:03'}}
  - {{name: s1, ip: 127.0.85.9, zone: z, mac: '02:00:00:00:77:09'}}
  - {{name: d1, ip: 192.0.2.1, zone: z, mac: '02:00:00:00:88:01'}}
  - {{name: d2, ip: 192.0.2.2, zone: z, mac: '02:00:00:00:88:02'}}
httpHealthChecks:
  - {{name: hc, port: {port}, requestPath: /healthz, checkIntervalSec: 1, timeoutSec: 1, healthyThreshold: 1, unhealthyThreshold: 1}}
"
    )
}

fn promtool(args: &[&str]) {
    let o = Command::new("promtool")
        .args(args)
        .output()
        .expect("promtool runs");
    assert!(
        o.status.success(),
        "promtool {}:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn prometheus_scrapes_every_metric_the_dashboard_and_alerts_use() {
    if !have("prometheus", "prometheus") || !have("promtool", "prometheus") {
        return;
    }
    let config_file = deploy("prometheus/prometheus.yml");
    let rules_file = deploy("prometheus/nlb-alerts.yml");
    promtool(&["check", "config", config_file.to_str().unwrap()]);
    promtool(&["check", "rules", rules_file.to_str().unwrap()]);
    promtool(&[
        "test",
        "rules",
        deploy("prometheus/nlb-alerts.test.yml").to_str().unwrap(),
    ]);
    let dashboard: serde_json::Value =
        serde_json::from_str(&read(&deploy("grafana/nlb-dashboard.json"))).expect("JSON");
    check_dashboard(&dashboard);

    // nlbd on a NIC with traffic through it.
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let port = hc_port(4);
    let config = dir.join("lb.yaml");
    std::fs::write(&config, config_text(port)).unwrap();
    let device = dir.join("nic.sock");
    let mut nic = Nic::start(&device);
    let _backends = [
        Backend::start(Ipv4Addr::new(127, 0, 85, 1), port),
        Backend::start(Ipv4Addr::new(127, 0, 85, 9), port),
    ];
    let nlbd = Nlbd::start(dir, &config, &device);
    nlbd.wait_for("web failed over to spare", || {
        let s = nlbd.admin("status")?;
        let web = s["pools"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == "web")?
            .clone();
        (web["failed_over"] == true).then_some(())
    });
    for i in 0..10 {
        nic.forward(&tcp(
            [198, 51, 100, 7],
            10000 + i,
            [203, 0, 113, 80],
            80,
            true,
        ));
        nic.forward(&udp([198, 51, 100, 8], 5000 + i, [203, 0, 113, 53], 53, 64));
    }
    let metrics = nlbd.admin("status").unwrap()["metrics_addr"]
        .as_str()
        .unwrap()
        .to_string();

    // Prometheus with deploy's configuration, pointed at this nlbd, every second.
    let mut text = String::new();
    let mut replaced = BTreeMap::new();
    for line in read(&config_file).lines() {
        let mut line = line.to_string();
        if !line.trim_start().starts_with('#') {
            for (from, to) in [
                ("127.0.0.1:9470", metrics.as_str()),
                ("scrape_interval: 15s", "scrape_interval: 1s"),
                ("evaluation_interval: 15s", "evaluation_interval: 1s"),
            ] {
                if line.contains(from) {
                    *replaced.entry(from).or_insert(0) += 1;
                    line = line.replace(from, to);
                }
            }
        }
        text.push_str(&line);
        text.push('\n');
    }
    assert_eq!(
        replaced,
        BTreeMap::from([
            ("127.0.0.1:9470", 1),
            ("evaluation_interval: 15s", 1),
            ("scrape_interval: 15s", 2)
        ]),
        "what the test changes in {}",
        config_file.display()
    );
    std::fs::write(dir.join("prometheus.yml"), text).unwrap();
    std::fs::copy(&rules_file, dir.join("nlb-alerts.yml")).unwrap();
    let prometheus = Prometheus::start(dir, &dir.join("prometheus.yml"));
    let addr = prometheus.addr.clone();
    // Enough scrapes for rates over a minute.
    prometheus.wait_for("4 scrapes of nlbd", || {
        let d = query(
            &addr,
            r#"count_over_time(up{job="nlbd"}[1m]) >= 4 and up{job="nlbd"} == 1"#,
        )
        .ok()?;
        (!d["result"].as_array()?.is_empty()).then_some(())
    });

    // Every selector selects series with samples; every expression evaluates.
    let mut queries = dashboard_queries(&dashboard);
    queries.extend(rule_queries(&read(&rules_file)));
    let mut by_selector: BTreeMap<Selector, Vec<String>> = BTreeMap::new();
    for (whose, expr) in &queries {
        let found = selectors(expr);
        assert!(!found.is_empty(), "{whose}: no metric in `{expr}`");
        for s in found {
            by_selector.entry(s).or_default().push(whose.clone());
        }
        if let Err(e) = query(&addr, &grafana(expr)) {
            panic!("{whose}: `{expr}` does not evaluate: {e}");
        }
    }
    let mut missing = Vec::new();
    for (s, whose) in &by_selector {
        let d = query(&addr, &s.query()).unwrap_or_else(|e| panic!("{}: {e}", s.query()));
        if d["result"].as_array().is_none_or(|r| r.is_empty()) {
            missing.push(format!("{} (used by {})", s.query(), whose.join(", ")));
        }
    }
    assert!(
        missing.is_empty(),
        "selectors without series in Prometheus:\n{}\nnlbd's metrics:\n{}",
        missing.join("\n"),
        harness_get_metrics(&metrics)
    );
    let metrics_used: BTreeSet<&str> = by_selector.keys().map(|s| s.metric.as_str()).collect();
    eprintln!(
        "{} expressions, {} selectors over {} metrics, all with samples",
        queries.len(),
        by_selector.len(),
        metrics_used.len()
    );

    // Every rule evaluates without error; the alerts pending are those the lab calls for.
    prometheus.wait_for("every rule evaluated", || {
        let (_, body) = get(&addr, "/api/v1/rules")?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let rules: Vec<serde_json::Value> = v["data"]["groups"]
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        assert_eq!(rules.len(), rule_queries(&read(&rules_file)).len());
        for r in &rules {
            assert_eq!(r["health"], "ok", "{r}");
        }
        rules
            .iter()
            .all(|r| {
                !r["lastEvaluation"]
                    .as_str()
                    .unwrap_or("0001")
                    .starts_with("0001")
            })
            .then_some(())
    });
    let alerts = prometheus.wait_for("the failover alerts", || {
        let (_, body) = get(&addr, "/api/v1/alerts")?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let mut alerts: Vec<(String, String, String)> = v["data"]["alerts"]
            .as_array()?
            .iter()
            .map(|a| {
                (
                    a["labels"]["alertname"].as_str().unwrap_or("").to_string(),
                    a["labels"]["pool"].as_str().unwrap_or("").to_string(),
                    a["state"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        alerts.sort();
        (alerts.len() >= 2).then_some(alerts)
    });
    let pending = |name: &str| (name.to_string(), "web".to_string(), "pending".to_string());
    assert_eq!(
        alerts,
        [
            pending("NlbPoolBelowHealthyThreshold"),
            pending("NlbPoolFailedOver")
        ],
        "1 of 3 healthy at failoverRatio 0.5, the backup serving; nothing else"
    );
}

fn harness_get_metrics(addr: &str) -> String {
    get(addr, "/metrics").map(|(_, b)| b).unwrap_or_default()
}
