//! Markdown as plain text for a terminal (`report --vs … --text`): each table's columns
//! aligned and its separator row dropped, heading marks, `**` and backticks removed, a line's
//! trailing two-space break dropped. Only the Markdown the reports write is read.

/// `md` as plain text.
pub fn from_markdown(md: &str) -> String {
    let mut out = String::new();
    let mut table: Vec<Vec<String>> = Vec::new();
    for line in md.lines() {
        let t = line.trim();
        if t.len() > 1 && t.starts_with('|') && t.ends_with('|') {
            let cells: Vec<String> = t[1..t.len() - 1]
                .split('|')
                .map(|c| inline(c.trim()))
                .collect();
            if !cells.iter().all(|c| is_separator(c)) {
                table.push(cells);
            }
            continue;
        }
        flush(&mut out, &mut table);
        let heading = t.starts_with('#');
        let text = if heading {
            t.trim_start_matches('#').trim_start()
        } else {
            line.trim_end()
        };
        out.push_str(&inline(text));
        out.push('\n');
    }
    flush(&mut out, &mut table);
    out
}

fn is_separator(cell: &str) -> bool {
    !cell.is_empty() && cell.chars().all(|c| matches!(c, '-' | ':'))
}

/// A cell or line without its emphasis and code marks.
fn inline(text: &str) -> String {
    text.replace("**", "").replace('`', "")
}

/// The table's rows, left-aligned, as lines of `out`.
fn flush(out: &mut String, table: &mut Vec<Vec<String>>) {
    for line in aligned(table, Align::Left) {
        out.push_str(&line);
        out.push('\n');
    }
    table.clear();
}

/// How [`aligned`] pads a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// `rows` as lines, each column as wide as its widest cell (in characters), two spaces apart,
/// no trailing spaces.
pub fn aligned(rows: &[Vec<String>], align: Align) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(s, w)| match align {
                    Align::Left => format!("{s:<w$}"),
                    Align::Right => format!("{s:>w$}"),
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_aligned_and_marks_dropped() {
        let md = "# A vs B\n\nA: `a` — **qualified**  \nB: b\n\n| figure | A | B |\n|---|---|---|\n| late packets | 0 | 12 |\n| deviation p99 | 0.166 ms | 2.9 ms |\n\nOne run each.\n";
        assert_eq!(
            from_markdown(md),
            "A vs B\n\nA: a — qualified\nB: b\n\nfigure         A         B\nlate packets   0         12\ndeviation p99  0.166 ms  2.9 ms\n\nOne run each.\n"
        );
    }
}
