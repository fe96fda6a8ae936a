//! The time limit: the most wall-clock time one forward (or one build's constant folding)
//! may take. It is the memory budget's counterpart for work rather than bytes: a model
//! whose every allocation fits can still ask for hours of work on small data (a Loop
//! whose state grows each iteration, a RoiAlign whose bins each sample a whole plane, a
//! DFT of a huge `dft_length` with an empty output), and a caller that serves requests, or
//! a fuzzer, needs that to end in a typed error naming the node instead of a hang.
//!
//! A [`Deadline`] is made when a forward starts (from the net's limit:
//! `NetBuilder::time_limit`, else `CONCORD_TIME_LIMIT`, else none) and travels with the
//! run, as the [`crate::MemoryBudget`] does: the reference executor checks it before every
//! node, nodes inside subgraphs included (so every Loop iteration), and kernels that can
//! run long on small data check it in their outer loop through a [`Ticker`], which reads
//! the clock only every [`Ticker::STRIDE`] steps. Over it is [`OpError::TimeLimit`], which
//! the runner wraps with the node and op. Executors that do not check it (the device
//! executors) are still stopped between partitions.
//!
//! The limit is checked, not enforced: a single step between two checks (one kernel's
//! inner loop over one output element) runs to its end, so a forward stops somewhat after
//! its limit, never before.

use crate::error::OpError;
use std::time::{Duration, Instant};

/// The environment variable that sets the time limit of every net that does not set its
/// own: a number with a unit, `ms`, `s`, `m` or `h` (`30s`, `500ms`, `2m`); a bare number
/// is seconds. Unset: no limit.
pub const TIME_LIMIT_ENV: &str = "CONCORD_TIME_LIMIT";

/// When one run must end: the moment it started and the limit it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    started: Instant,
    limit: Duration,
}

impl Deadline {
    /// A deadline `limit` from now.
    pub fn starting_now(limit: Duration) -> Self {
        Deadline {
            started: Instant::now(),
            limit,
        }
    }

    /// The limit it was given.
    pub fn limit(self) -> Duration {
        self.limit
    }

    /// Ok while within the limit; past it, [`OpError::TimeLimit`] saying what was running
    /// (`what`, made only then).
    pub fn check(self, what: impl FnOnce() -> String) -> Result<(), OpError> {
        let elapsed = self.started.elapsed();
        if elapsed <= self.limit {
            Ok(())
        } else {
            Err(OpError::TimeLimit {
                what: what(),
                elapsed,
                limit: self.limit,
            })
        }
    }
}

/// [`Deadline::check`] for an optional deadline: no deadline, no limit.
pub fn check(deadline: Option<Deadline>, what: impl FnOnce() -> String) -> Result<(), OpError> {
    match deadline {
        Some(d) => d.check(what),
        None => Ok(()),
    }
}

/// A deadline check for a kernel's outer loop, cheap enough to call every iteration: it
/// reads the clock on every [`Ticker::STRIDE`]th call only.
#[derive(Clone, Debug)]
pub struct Ticker {
    deadline: Option<Deadline>,
    count: u32,
}

impl Ticker {
    /// Calls between two readings of the clock. A reading costs tens of nanoseconds; the
    /// loops that tick do at least that much work per step, so the checks cost a few per
    /// cent at most, and the step between two readings is short next to any useful limit.
    pub const STRIDE: u32 = 64;

    pub fn new(deadline: Option<Deadline>) -> Self {
        Ticker { deadline, count: 0 }
    }

    /// Counts one step; on every [`Ticker::STRIDE`]th, checks the deadline (`what` says
    /// what the kernel was doing, made only when it is past).
    pub fn tick(&mut self, what: impl FnOnce() -> String) -> Result<(), OpError> {
        let Some(deadline) = self.deadline else {
            return Ok(());
        };
        self.count += 1;
        if self.count < Self::STRIDE {
            return Ok(());
        }
        self.count = 0;
        deadline.check(what)
    }
}

/// The limit `CONCORD_TIME_LIMIT` sets, or None when it is unset; an unreadable value is
/// an error naming it.
pub fn time_limit_from_env() -> Result<Option<Duration>, String> {
    match std::env::var(TIME_LIMIT_ENV) {
        Ok(text) => parse_duration(&text).map(Some).ok_or_else(|| {
            format!(
                "{TIME_LIMIT_ENV}=`{}` is not a duration (a number with ms, s, m or h)",
                crate::text::elide_middle(&text, 64)
            )
        }),
        Err(_) => Ok(None),
    }
}

/// A duration as `CONCORD_TIME_LIMIT` writes it: a whole or decimal number, then `ms`,
/// `s`, `m` or `h` (a bare number is seconds). Negative, non-finite or absurd values
/// (past `Duration`'s range) are None.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_end);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "" | "s" => number,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration(" 1.5 h "), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("-3s"), None);
        assert_eq!(parse_duration("1e400s"), None);
    }

    #[test]
    fn a_past_deadline_is_a_time_limit_error_naming_what_ran() {
        let past = Deadline::starting_now(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2));
        let error = past.check(|| "the test's loop".to_string());
        assert!(
            matches!(&error, Err(OpError::TimeLimit { what, limit, .. })
                if what == "the test's loop" && *limit == Duration::ZERO),
            "{error:?}"
        );
        let mut ticker = Ticker::new(Some(past));
        let ticks: Vec<bool> = (0..Ticker::STRIDE)
            .map(|_| ticker.tick(String::new).is_err())
            .collect();
        // Only the STRIDE-th tick reads the clock.
        assert_eq!(ticks.iter().filter(|&&e| e).count(), 1);
        assert!(ticks[Ticker::STRIDE as usize - 1]);
        let generous = Deadline::starting_now(Duration::from_secs(3600));
        assert_eq!(generous.check(String::new), Ok(()));
        assert_eq!(check(None, String::new), Ok(()));
    }
}
