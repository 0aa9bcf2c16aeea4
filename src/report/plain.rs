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

/// The table's rows, each column as wide as its widest cell, two spaces apart.
fn flush(out: &mut String, table: &mut Vec<Vec<String>>) {
    let columns = table.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    for row in table.iter() {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in table.drain(..) {
        let mut line = String::new();
        for (k, cell) in row.iter().enumerate() {
            if k > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            let pad = widths[k].saturating_sub(cell.chars().count());
            line.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
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
