//! Text that people read, kept to a readable size: long names elided in the middle, long
//! lists cut with a count, messages folded onto one line. Models are hostile input, and
//! their names, op types and shapes reach error messages; these keep every message short
//! enough to read in a terminal or a CI log whatever the model holds.

use std::borrow::Cow;
use std::fmt::Display;

/// The most items [`list`] and shape displays print before cutting with a count.
pub const LIST_ITEMS: usize = 16;

/// `s` if it has at most `max` characters, else its head and tail with
/// "…(N chars)…" in place of the middle, so both ends of a long name stay recognisable.
pub fn elide_middle(s: &str, max: usize) -> Cow<'_, str> {
    let len = s.chars().count();
    if len <= max {
        return Cow::Borrowed(s);
    }
    let keep = max.saturating_sub(16).max(2);
    let head = keep - keep / 3;
    let tail = keep / 3;
    let elided = len - head - tail;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(len - tail).collect();
    Cow::Owned(format!("{start}…({elided} chars)…{end}"))
}

/// Items joined by ", "; past `max_items`, the first ones, "…", the last two and how many
/// were left out: "3, 3, 3, …(19,985 more)…, 3, 3".
pub fn list<T: Display>(items: &[T], max_items: usize) -> String {
    if items.len() <= max_items.max(3) {
        return items
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
    }
    let tail = 2;
    let head = max_items.max(3) - tail;
    let mut parts: Vec<String> = items[..head].iter().map(|i| i.to_string()).collect();
    parts.push(format!("…({} more)…", items.len() - head - tail));
    parts.extend(items[items.len() - tail..].iter().map(|i| i.to_string()));
    parts.join(", ")
}

/// A message as one line of at most about `max` characters: control characters and line
/// breaks become spaces, every word longer than a quarter of `max` is elided in the middle,
/// and what is still too long keeps its beginning and end.
pub fn one_line(message: &str, max: usize) -> String {
    let flat: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let word_max = (max / 4).max(24);
    let words: Vec<Cow<'_, str>> = flat.split(' ').map(|w| elide_middle(w, word_max)).collect();
    let joined = words.join(" ");
    elide_middle(&joined, max).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(elide_middle("Conv_0", 10), "Conv_0");
        assert_eq!(list(&[1, 2, 3], 16), "1, 2, 3");
        assert_eq!(one_line("a\nb\tc", 100), "a b c");
    }

    #[test]
    fn long_names_keep_both_ends_and_say_how_much_is_gone() {
        let name = format!("head{}tail", "é".repeat(1_000));
        let short = elide_middle(&name, 80);
        assert!(short.starts_with("head"), "{short}");
        assert!(short.ends_with("tail"), "{short}");
        assert!(short.contains("chars)…"), "{short}");
        assert!(short.chars().count() <= 80, "{short}");
    }

    #[test]
    fn long_lists_are_cut_with_a_count() {
        let values: Vec<usize> = (0..20_000).collect();
        let cut = list(&values, 16);
        assert!(cut.starts_with("0, 1, 2, "), "{cut}");
        assert!(cut.ends_with("19998, 19999"), "{cut}");
        assert!(cut.contains("…(19984 more)…"), "{cut}");
    }

    #[test]
    fn one_line_bounds_the_whole_message() {
        let message = format!(
            "error in {}\nand {}",
            "x".repeat(5_000),
            "word ".repeat(2_000)
        );
        let line = one_line(&message, 1_000);
        assert!(!line.contains('\n'));
        assert!(line.chars().count() <= 1_000, "{}", line.chars().count());
        assert!(line.starts_with("error in x"), "{line}");
    }
}
