//! `nlbctl stats`: the NIC's packet, byte, punt and drop counters.

use crate::common::{self, CliError, Input};
use nlb_driver::queues::{read_counters, CounterKind, CounterValue};
use nlb_driver::{discover, open_device};
use nlb_hw::enums::{Reason, Verdict};
use std::path::PathBuf;

/// Show the NIC's counters: per verdict, per reason, and per rule and backend (SPEC R10.1).
///
/// Rules and backends are shown by id, or by name with `--names` (the image or configuration
/// that was loaded). Only counters that are not zero are listed.
///
/// Example: nlbctl stats --device sim:/tmp/nlb.sock --names web.img --json
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The NIC: pci:DDDD:BB:DD.F or sim:PATH.
    #[arg(long, value_name = "SPEC")]
    device: String,
    /// Image or configuration whose names label rules and backends.
    #[arg(long, value_name = "FILE")]
    names: Option<PathBuf>,
    /// Reset every counter as it is read.
    #[arg(long)]
    clear: bool,
    #[command(flatten)]
    output: common::Output,
}

fn json(v: &CounterValue) -> serde_json::Value {
    serde_json::json!({"packets": v.packets, "bytes": v.bytes, "punts": v.punts, "drops": v.drops})
}

fn nonzero(v: &CounterValue) -> bool {
    v.packets | v.bytes | v.punts | v.drops != 0
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut dev = open_device(&args.device).map_err(|e| CliError::user(format!("error: {e}")))?;
    let fail =
        |e: &dyn std::fmt::Display| CliError::internal(format!("error: {}: {e}", args.device));
    let info = discover(dev.as_mut()).map_err(|e| fail(&e))?;
    let names = match &args.names {
        Some(p) => Some(Input::open(p, &common::health(None)?, info.profile)?),
        None => None,
    };
    let symbols = names.as_ref().map(|n| n.parts().1);
    let p = info.profile;
    let mut read = |kind, n: u32| read_counters(dev.as_mut(), kind, 0..n, args.clear);
    let verdicts = read(CounterKind::Verdict, Verdict::ALL.len() as u32).map_err(|e| fail(&e))?;
    let reasons = read(CounterKind::Reason, Reason::ALL.len() as u32).map_err(|e| fail(&e))?;
    let rules = read(CounterKind::Rule, p.rules).map_err(|e| fail(&e))?;
    let backends = read(CounterKind::Backend, p.backends).map_err(|e| fail(&e))?;
    let label = |kind: CounterKind, id: usize| -> String {
        let name = symbols.and_then(|s| match kind {
            CounterKind::Rule => s.rule(id as u16),
            _ => s.backend(id as u16),
        });
        name.map_or_else(|| format!("#{id}"), str::to_string)
    };
    if args.output.json() {
        let by_name = |values: &[CounterValue], names: &[&str]| -> serde_json::Value {
            values
                .iter()
                .zip(names)
                .map(|(v, n)| (n.to_ascii_lowercase(), json(v)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let listed = |kind: CounterKind, values: &[CounterValue]| -> Vec<serde_json::Value> {
            values
                .iter()
                .enumerate()
                .filter(|(_, v)| nonzero(v))
                .map(|(i, v)| {
                    let mut o = json(v);
                    o["id"] = i.into();
                    o["name"] = symbols
                        .and_then(|s| match kind {
                            CounterKind::Rule => s.rule(i as u16),
                            _ => s.backend(i as u16),
                        })
                        .map_or(serde_json::Value::Null, |n| n.into());
                    o
                })
                .collect()
        };
        return common::print_json(&serde_json::json!({
            "device": args.device,
            "verdicts": by_name(&verdicts, &Verdict::NAMES),
            "reasons": by_name(&reasons, &Reason::NAMES),
            "rules": listed(CounterKind::Rule, &rules),
            "backends": listed(CounterKind::Backend, &backends),
        }));
    }
    outln!(
        "{:<28} {:>14} {:>16} {:>10} {:>10}",
        "counter",
        "packets",
        "bytes",
        "punts",
        "drops"
    );
    let line = |what: String, v: &CounterValue| {
        outln!(
            "{what:<28} {:>14} {:>16} {:>10} {:>10}",
            v.packets,
            v.bytes,
            v.punts,
            v.drops
        );
    };
    for (v, n) in verdicts.iter().zip(Verdict::NAMES) {
        line(format!("verdict {}", n.to_ascii_lowercase()), v);
    }
    for (v, n) in reasons
        .iter()
        .zip(Reason::NAMES)
        .filter(|(v, _)| nonzero(v))
    {
        line(format!("reason {}", n.to_ascii_lowercase()), v);
    }
    for (i, v) in rules.iter().enumerate().filter(|(_, v)| nonzero(v)) {
        line(format!("rule {}", label(CounterKind::Rule, i)), v);
    }
    for (i, v) in backends.iter().enumerate().filter(|(_, v)| nonzero(v)) {
        line(format!("backend {}", label(CounterKind::Backend, i)), v);
    }
    Ok(())
}
