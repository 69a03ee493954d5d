//! Installing the tools as deploy/install.sh does, into a staging tree, and checking what it
//! installs: shell completions and man pages generated from the clap definitions (every
//! command and option of every binary in them; bash really completes), and the systemd units
//! (`systemd-analyze verify` with the generated man pages, their hardening, the exposure
//! `systemd-analyze security` gives them, and their command lines accepted by the binaries).
//!
//! Needs systemd-analyze (package systemd), man (man-db) and bash; ./test.sh installs them
//! (without them the tests skip, unless CI is set).

use nlb_system_tests::harness;

use harness::have;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(path: &str) -> PathBuf {
    nlb_system_tests::bins::workspace().join(path)
}

fn bin_dir() -> PathBuf {
    Path::new(nlb_system_tests::bin("nlbctl"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `deploy/install.sh --destdir DIR`, with the binaries of this build.
fn install(dest: &Path) -> PathBuf {
    let (ok, out, err) = run(Command::new("bash")
        .arg(repo("deploy/install.sh"))
        .arg("--destdir")
        .arg(dest)
        .arg("--bin-dir")
        .arg(bin_dir()));
    assert!(ok, "install.sh:\n{out}{err}");
    dest.join("usr/local")
}

/// The subcommands `nlbctl help` lists (what a user is told exists).
fn nlbctl_commands() -> Vec<String> {
    let (ok, out, _) = run(Command::new(nlb_system_tests::bin("nlbctl")).arg("help"));
    assert!(ok);
    let list = commands_listed(&out);
    for c in ["top", "status", "load", "conntrack", "completions", "man"] {
        assert!(
            list.iter().any(|x| x == c),
            "`nlbctl help` lists no {c}: {out}"
        );
    }
    list
}

/// The subcommands of `nlbctl COMMAND` (`nlbctl fleet status`), as `[COMMAND, SUB]`.
fn nlbctl_subcommands(command: &str) -> Vec<[String; 2]> {
    let (ok, out, _) = run(Command::new(nlb_system_tests::bin("nlbctl")).args(["help", command]));
    assert!(ok);
    commands_listed(&out)
        .into_iter()
        .map(|s| [command.to_string(), s])
        .collect()
}

/// The commands a help text lists under `Commands:`, but `help`.
fn commands_listed(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// The long options `BINARY ARGS --help` defines (its option lines, not its prose).
fn long_options(binary: &Path, args: &[&str]) -> BTreeSet<String> {
    let (ok, out, err) = run(Command::new(binary).args(args).arg("--help"));
    assert!(ok, "{err}");
    out.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("--"))
                .and_then(|w| {
                    w.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                        .next()
                })
                .map(str::to_string)
        })
        .collect()
}

/// A man page's text with roff's escaped hyphens plain.
fn man_text(path: &Path) -> String {
    read(path).replace("\\-", "-")
}

/// What bash completes for the words typed so far (the last one is being typed), with the
/// installed script loaded as bash-completion would load it.
fn complete(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program =
        format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; \
         _{} '{}' '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words.join(" "),
        words[0].replace('-', "__"),
        words[0],
        words[words.len() - 1],
        words.get(words.len().wrapping_sub(2)).copied().unwrap_or(""),
    );
    let (ok, out, err) = run(Command::new("bash").args(["--norc", "-c", &program]));
    assert!(ok, "{program}\n{err}");
    out.lines().map(str::to_string).collect()
}

#[test]
fn completions_and_man_pages_cover_every_command_and_option() {
    if !have("man", "man-db") {
        return;
    }
    let dest = tempfile::tempdir().unwrap();
    let root = install(dest.path());
    let man1 = root.join("share/man/man1");
    let commands = nlbctl_commands();
    let nlbctl = root.join("bin/nlbctl");

    // Man pages: nlbctl(1) names every command; each command has its page with every option
    // its --help lists; the daemons' pages have every option theirs list. Each page renders
    // without a warning.
    let main = man_text(&man1.join("nlbctl.1"));
    for c in &commands {
        assert!(
            main.contains(&format!("nlbctl-{c}(1)")),
            "nlbctl.1 lacks {c}"
        );
        let page = man1.join(format!("nlbctl-{c}.1"));
        let text = man_text(&page);
        for o in long_options(&nlbctl, &[c]) {
            assert!(
                text.contains(&format!("--{o}")),
                "{} lacks --{o}",
                page.display()
            );
        }
    }
    // Commands of commands (`nlbctl fleet status`) have a page each too.
    let nested: Vec<[String; 2]> = commands
        .iter()
        .flat_map(|c| nlbctl_subcommands(c))
        .collect();
    assert!(
        nested.iter().any(|[c, s]| c == "fleet" && s == "status"),
        "{nested:?}"
    );
    for [c, s] in &nested {
        let page = man1.join(format!("nlbctl-{c}-{s}.1"));
        let text = man_text(&page);
        for o in long_options(&nlbctl, &[c, s]) {
            assert!(
                text.contains(&format!("--{o}")),
                "{} lacks --{o}",
                page.display()
            );
        }
    }
    for (b, page) in [("nlbd", "nlbd.1"), ("nlb-sim", "nlb-sim.1")] {
        let text = man_text(&man1.join(page));
        let options = long_options(&root.join("bin").join(b), &[]);
        assert!(
            options.contains("completions") && options.contains("man"),
            "{options:?}"
        );
        for o in options {
            assert!(text.contains(&format!("--{o}")), "{page} lacks --{o}");
        }
    }
    let pages: Vec<PathBuf> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(pages.len(), commands.len() + nested.len() + 3, "{pages:?}");
    for p in &pages {
        let (ok, out, err) = run(Command::new("man")
            .args(["--warnings", "-l"])
            .arg(p)
            .env("MANWIDTH", "100"));
        assert!(ok && err.is_empty(), "{}: {err}", p.display());
        assert!(
            out.contains("NAME") && out.contains("SYNOPSIS"),
            "{}",
            p.display()
        );
    }

    // Completions: every command in each shell's script; bash's parses and completes.
    let completions = root.join("share");
    for (path, shell) in [
        ("bash-completion/completions/nlbctl", "bash"),
        ("zsh/site-functions/_nlbctl", "zsh"),
        ("fish/vendor_completions.d/nlbctl.fish", "fish"),
    ] {
        let text = read(&completions.join(path));
        for c in &commands {
            assert!(text.contains(c.as_str()), "the {shell} script lacks {c}");
        }
    }
    for b in ["nlbctl", "nlbd", "nlb-sim"] {
        let script = completions.join("bash-completion/completions").join(b);
        let (ok, _, err) = run(Command::new("bash").arg("-n").arg(&script));
        assert!(ok, "{b}: {err}");
    }
    let bash = completions.join("bash-completion/completions/nlbctl");
    let all = complete(&bash, &["nlbctl", ""]);
    for c in &commands {
        assert!(all.contains(c), "`nlbctl <TAB>` offers no {c}: {all:?}");
    }
    assert_eq!(complete(&bash, &["nlbctl", "to"]), ["top"]);
    let mut top = complete(&bash, &["nlbctl", "top", "--s"]);
    top.sort();
    assert_eq!(top, ["--socket", "--sort"]);
    let mut sort = complete(&bash, &["nlbctl", "top", "--sort", ""]);
    sort.sort();
    assert_eq!(sort, ["bytes", "name", "packets", "total"]);
    assert_eq!(complete(&bash, &["nlbctl", "status", "-o", "j"]), ["json"]);
    let nlbd = completions.join("bash-completion/completions/nlbd");
    assert!(complete(&nlbd, &["nlbd", "--metr"]).contains(&"--metrics-addr".to_string()));
}

/// `KEY=value` defaults of a unit's `Environment=` lines.
fn unit_environment(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The unit's `ExecStart=` with its `${VAR}` and `$VAR` expanded from `env`, split into words.
fn exec_start(unit: &str, env: &[(String, String)]) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    line.split_whitespace()
        .filter_map(|w| {
            let name = w
                .strip_prefix("${")
                .and_then(|w| w.strip_suffix('}'))
                .or_else(|| w.strip_prefix('$'));
            match name {
                Some(n) => {
                    let v = env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
                    // An unset `$VAR` (the OPTIONS hooks) expands to nothing, as in systemd.
                    v.filter(|v| !v.is_empty())
                }
                None => Some(w.to_string()),
            }
        })
        .collect()
}

#[test]
fn service_units_verify_and_are_hardened() {
    if !have("systemd-analyze", "systemd") || !have("man", "man-db") {
        return;
    }
    let dest = tempfile::tempdir().unwrap();
    let root = install(dest.path());
    let units = dest.path().join("etc/systemd/system");
    // Verify the installed units as they are, but with the binaries where the staging tree
    // has them, and the generated man pages for their Documentation=.
    let check = dest.path().join("check");
    std::fs::create_dir(&check).unwrap();
    for (unit, binary, caps) in [
        ("nlbd.service", "nlbd", ""),
        ("nlb-sim.service", "nlb-sim", "CAP_NET_RAW"),
    ] {
        let text = read(&units.join(unit));
        let staged = text.replace(
            "/usr/local/bin/",
            &format!("{}/", root.join("bin").display()),
        );
        assert_ne!(staged, text, "{unit} runs /usr/local/bin/{binary}");
        std::fs::write(check.join(unit), &staged).unwrap();
        let (ok, out, err) = run(Command::new("systemd-analyze")
            .args(["verify", "--man=yes"])
            .arg(check.join(unit))
            .env("MANPATH", root.join("share/man")));
        assert!(ok && err.trim().is_empty(), "verify {unit}:\n{out}{err}");

        // The hardening the issue asks for, and the capabilities actually needed.
        for line in [
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "User=nlb",
            &format!("CapabilityBoundingSet={caps}"),
            &format!("AmbientCapabilities={caps}"),
        ] {
            assert!(text.lines().any(|l| l == line), "{unit} lacks `{line}`");
        }
        let (_, out, err) = run(Command::new("systemd-analyze")
            .args(["security", "--offline=yes"])
            .arg(check.join(unit)));
        let level: f64 = out
            .lines()
            .chain(err.lines())
            .find_map(|l| l.split("Overall exposure level for ").nth(1))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no exposure level for {unit}:\n{out}{err}"));
        assert!(
            level <= 2.0,
            "{unit}: exposure {level} (2.0 or less expected)\n{out}"
        );

        // Its command line, with the defaults it sets, is one the binary accepts.
        let env = unit_environment(&text);
        let mut argv = exec_start(&staged, &env);
        argv.push("--help".into());
        let (ok, _, err) = run(Command::new(&argv[0]).args(&argv[1..]));
        assert!(ok, "{unit}: {argv:?}: {err}");

        // Its settings file sets the variables the unit reads, and no others.
        let default = dest
            .path()
            .join(format!("etc/default/{}", unit.trim_end_matches(".service")));
        let set: BTreeSet<String> = read(&default)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_string()))
            .collect();
        let used: BTreeSet<String> = text
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap()
            .split_whitespace()
            .filter_map(|w| {
                w.strip_prefix("${")
                    .and_then(|w| w.strip_suffix('}'))
                    .or_else(|| w.strip_prefix('$'))
            })
            .map(str::to_string)
            .chain(env.iter().map(|(k, _)| k.clone()))
            .collect();
        assert_eq!(set, used, "{} against {unit}", default.display());
    }
    // nlbd's admin socket is where nlbctl looks by default.
    let nlbd = read(&units.join("nlbd.service"));
    assert!(nlbd.contains("--admin-socket /run/nlbd/nlbd.sock"));
    assert!(nlbd.contains("/bin/ln -sfn /run/nlbd/nlbd.sock /run/nlbd.sock"));
    let (_, help, _) = run(Command::new(nlb_system_tests::bin("nlbctl")).args(["top", "--help"]));
    assert!(help.contains("[default: /run/nlbd.sock]"), "{help}");
}
