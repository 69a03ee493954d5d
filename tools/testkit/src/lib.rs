//! What the workspace's tests share.
//!
//! - [`needs`]: the one rule for a test that needs something the machine may lack (root, a
//!   program, a feature of the kernel): outside CI it says what is missing and how to get it,
//!   and the test passes without running; under CI (`CI` set, as `./test.sh` runs in CI) it
//!   fails. Nothing else in the workspace decides whether a test may skip.
//! - [`hex`]: bytes as lower-case hex, for failure messages and digests.
//! - [`sysfs`]: a PCI bus laid out as sysfs in a directory, and a fake kernel that reacts to
//!   the bind and unbind writes.
#![deny(missing_docs)]

pub mod sysfs;

use std::process::Command;

/// Whether the tests run under CI: `CI` set to anything but empty, `0` or `false`.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Something a test needs that a machine may lack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Root (network namespaces, veth pairs, raw sockets).
    Root,
    /// A program on `PATH`, from a Debian package.
    Program {
        /// The command.
        name: String,
        /// The Debian package that installs it.
        package: String,
    },
}

impl Need {
    /// `name` on `PATH`, installed by Debian package `package`.
    pub fn program(name: &str, package: &str) -> Need {
        Need::Program {
            name: name.to_string(),
            package: package.to_string(),
        }
    }

    /// Whether this machine has it.
    pub fn present(&self) -> bool {
        match self {
            // SAFETY: geteuid(2) has no preconditions and cannot fail.
            Need::Root => (unsafe { libc::geteuid() }) == 0,
            Need::Program { name, .. } => on_path(name),
        }
    }

    /// What is missing and how to get it, in words.
    fn missing(&self, test: &str) -> String {
        match self {
            Need::Root => format!("{test} needs root (run it with sudo -E)"),
            Need::Program { name, package } => format!(
                "{test} needs `{name}` (apt-get install -y {package}; ./test.sh installs it)"
            ),
        }
    }
}

/// Whether `name` is an executable on `PATH`.
pub fn on_path(name: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether `test` may run: true when this machine has everything in `needs`. Otherwise, outside
/// CI, prints `skipped: <what is missing and how to get it>` and returns false (the caller
/// returns, and the test passes without running); under CI it panics with the same words, so a
/// CI run never passes a test it did not run.
pub fn needs(test: &str, needs: &[Need]) -> bool {
    let missing: Vec<String> = needs
        .iter()
        .filter(|n| !n.present())
        .map(|n| n.missing(test))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let words = missing.join("; ");
    assert!(
        !ci(),
        "{words}, and CI is set: a CI run does not skip tests"
    );
    eprintln!("skipped: {words}");
    false
}

/// `bytes` as lower-case hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn a_program_that_is_not_there_is_missing_and_sh_is_present() {
        assert!(Need::program("sh", "dash").present());
        assert!(!Need::program("no-such-program-nlb", "none").present());
    }

    #[test]
    fn a_missing_need_skips_outside_ci_and_fails_under_ci() {
        let need = [Need::program("no-such-program-nlb", "nlb-nothing")];
        let outcome = std::panic::catch_unwind(|| needs("this test", &need));
        if ci() {
            let message = outcome.expect_err("CI may not skip");
            let text = message
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default();
            assert!(text.contains("apt-get install -y nlb-nothing"), "{text}");
        } else {
            assert_eq!(outcome.ok(), Some(false));
        }
        assert!(needs("this test", &[Need::program("sh", "dash")]));
    }
}
