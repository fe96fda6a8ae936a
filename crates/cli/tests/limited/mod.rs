//! `concord` in a child process under an address-space limit, as the tests of hostile sizes
//! and the adversarial corpus run it: a regression that allocates without checking aborts
//! only the child, and the test sees its exit status.

use std::process::Command;

/// The address-space limit every child runs under, in KiB (`ulimit -v` counts KiB): 4 GiB.
pub const ADDRESS_LIMIT_KIB: u64 = 4 * 1024 * 1024;

/// `concord ARGS` under the address-space limit, with no fallback policy, requirement or
/// memory limit of Concord's own taken from the environment. Working directory and stdio
/// are the caller's to set.
pub fn concord<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_LIMIT_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_concord"))
        .args(args)
        .env_remove("CONCORD_FALLBACK")
        .env_remove("CONCORD_REQUIRE")
        .env_remove("CONCORD_MEMORY_LIMIT");
    command
}
