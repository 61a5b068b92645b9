//! READMEs rendered from Markdown for the module page, and made safe twice over. HTML written in
//! the Markdown is shown as text, never as markup, so a `<script>` or an `<img onerror=…>`
//! reads as what it is. The rendered HTML then goes through ammonia's allow-list, which keeps
//! only known tags and attributes (no event handler, no `style`), links only over http(s) or
//! mailto, and images only over https. The page's CSP forbids scripts on top of both.

use std::collections::HashSet;

use ammonia::UrlRelative;
use pulldown_cmark::{html, CowStr, Event, Options, Parser};

/// The most README rendered (bytes); the rest is cut, with a note. Ingest keeps READMEs
/// smaller than this already; the bound holds whatever the store gives.
const MAX_README_BYTES: usize = 256 * 1024;

/// What one page renders at most: its READMEs' Markdown together (bytes), and per README the
/// table cells, the nesting of block quotes, the parser's events and the HTML it makes. Past
/// any of them a README is shown as too large to render, so no page costs more than these,
/// whatever its authors wrote: pulldown-cmark pads every row of a table to its header's cells
/// (a 64 KB README of short rows made 256K cells a table: 56 s and 1.1 GB for one view), and
/// 60 KB of `>` cost 19 s of CPU.
const PAGE_MARKDOWN_BYTES: usize = 256 * 1024;
const MAX_TABLE_CELLS: usize = 10_000;
const MAX_QUOTE_DEPTH: usize = 32;
const MAX_EVENTS: usize = 100_000;
const MAX_HTML_BYTES: usize = 1024 * 1024;

/// What is left of a page's rendering budget, and the hosts its READMEs' images may load from.
pub struct Budget {
    markdown_bytes: usize,
    image_hosts: HashSet<String>,
}

impl Budget {
    /// The budget of one page whose images may come from `image_hosts` (lowercase host names).
    pub fn page(image_hosts: impl IntoIterator<Item = String>) -> Self {
        Budget { markdown_bytes: PAGE_MARKDOWN_BYTES, image_hosts: image_hosts.into_iter().collect() }
    }
}

/// The README as sanitized HTML, or a plain note that it is too large to render.
pub fn render(markdown: &str, budget: &mut Budget) -> String {
    let mut end = markdown.len().min(MAX_README_BYTES);
    while !markdown.is_char_boundary(end) {
        end -= 1;
    }
    let text = &markdown[..end];
    if text.len() > budget.markdown_bytes {
        return too_large("the page's READMEs are larger together than it shows");
    }
    budget.markdown_bytes -= text.len();
    if let Some(why) = too_costly(text) {
        return too_large(&why);
    }
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut events = 0;
    let mut over = false;
    let parsed = Parser::new_ext(text, options)
        .take_while(|_| {
            events += 1;
            over = events > MAX_EVENTS;
            !over
        })
        .map(|event| match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            other => other,
        });
    let mut rendered = String::new();
    html::push_html(&mut rendered, parsed);
    if over {
        return too_large(&format!("more than {MAX_EVENTS} elements"));
    }
    if rendered.len() > MAX_HTML_BYTES {
        return too_large(&format!("more than {} KiB of HTML", MAX_HTML_BYTES / 1024));
    }
    if end < markdown.len() {
        html::push_html(&mut rendered, std::iter::once(Event::Text(CowStr::from("(The README is cut here.)"))));
    }
    sanitizer(&budget.image_hosts).clean(&rendered).to_string()
}

/// The plain notice shown in place of a README past the bounds.
fn too_large(why: &str) -> String {
    let mut shown = String::from("<p class=\"empty\">README too large to render (");
    html::push_html(&mut shown, std::iter::once(Event::Text(CowStr::from(why))));
    shown.push_str(").</p>");
    shown
}

/// Why rendering `text` would cost more than the bounds, read in one pass before the parser
/// sees it: the cells its tables would be padded to, and how deep its block quotes nest.
fn too_costly(text: &str) -> Option<String> {
    let mut cells = 0usize;
    let mut columns: Option<usize> = None;
    let mut previous_blank = true;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let depth = trimmed.bytes().take_while(|b| *b == b'>' || *b == b' ').filter(|b| *b == b'>').count();
        if depth > MAX_QUOTE_DEPTH {
            return Some(format!("block quotes nested deeper than {MAX_QUOTE_DEPTH}"));
        }
        if trimmed.is_empty() {
            columns = None;
        } else if let Some(width) = columns {
            // Every row of a table is padded to its header's cells.
            cells = cells.saturating_add(width);
        } else if is_delimiter_row(trimmed) && !previous_blank {
            let width = trimmed.trim_matches('|').split('|').count();
            // The header and the delimiter row.
            cells = cells.saturating_add(width.saturating_mul(2));
            columns = Some(width);
        }
        if cells > MAX_TABLE_CELLS {
            return Some(format!("tables of more than {MAX_TABLE_CELLS} cells"));
        }
        previous_blank = trimmed.is_empty();
    }
    None
}

/// A table's delimiter row (`| --- | :-: |`): pipes, dashes, colons and spaces, with a dash.
fn is_delimiter_row(line: &str) -> bool {
    line.contains('-') && line.contains('|') && line.bytes().all(|b| matches!(b, b'|' | b'-' | b':' | b' ' | b'\t'))
}

fn sanitizer(image_hosts: &HashSet<String>) -> ammonia::Builder<'static> {
    let image_hosts = image_hosts.clone();
    let mut builder = ammonia::Builder::default();
    builder
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .url_relative(UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"))
        .attribute_filter(move |element, attribute, value| match (element, attribute) {
            ("img", "src") if !image_allowed(value, &image_hosts) => None,
            _ => Some(value.into()),
        });
    builder
}

/// Whether an image may load from `src`: over https, from one of `hosts`.
fn image_allowed(src: &str, hosts: &HashSet<String>) -> bool {
    let Some(rest) = src.strip_prefix("https://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // No user information: `https://allowed@elsewhere/` goes elsewhere.
    if authority.contains('@') {
        return false;
    }
    let host = authority.split(':').next().unwrap_or_default().to_ascii_lowercase();
    hosts.contains(&host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_one(markdown: &str) -> String {
        render(markdown, &mut Budget::page(["img.example".to_owned()]))
    }

    #[test]
    fn tables_padded_past_the_bound_are_too_large_to_render() {
        let header = format!("|{}\n|{}\n", "a|".repeat(2000), "-|".repeat(2000));
        let readme = format!("{header}{}", "|x\n".repeat(4000));
        let html = render_one(&readme);
        assert!(html.contains("README too large to render"), "{}", &html[..html.len().min(200)]);
        assert!(html.len() < 200, "{}", html.len());
    }

    #[test]
    fn deep_block_quotes_are_too_large_to_render() {
        let html = render_one(&">".repeat(60_000));
        assert!(html.contains("README too large to render"));
        assert!(render_one("> > quoted twice").contains("<blockquote>"));
    }

    #[test]
    fn a_page_renders_at_most_its_budget_of_markdown() {
        let mut budget = Budget::page([]);
        let readme = "word ".repeat(20 * 1024);
        assert!(!render(&readme, &mut budget).contains("too large"));
        assert!(!render(&readme, &mut budget).contains("too large"));
        assert!(render(&readme, &mut budget).contains("too large"), "past the page's budget");
    }

    #[test]
    fn html_in_a_readme_is_text_and_nothing_can_run() {
        let html = render_one("# Title\n\n<script>alert(1)</script>\n\nText <img src=x onerror=alert(2)> more\n");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(2)&gt;"), "{html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
    }

    #[test]
    fn links_and_images_keep_only_safe_urls() {
        let html = render_one(
            "[a](javascript:alert(1)) [b](https://example.com/x) [c](data:text/html,x) [d](/relative)\n\n\
             ![https](https://img.example/badge.svg) ![http](http://img.example/badge.svg)",
        );
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("data:"), "{html}");
        assert!(!html.contains("href=\"/relative\""), "{html}");
        assert!(html.contains("href=\"https://example.com/x\""), "{html}");
        assert!(html.contains("rel=\"noopener noreferrer nofollow\""), "{html}");
        assert!(html.contains("src=\"https://img.example/badge.svg\""), "{html}");
        assert!(!html.contains("src=\"http://img.example"), "{html}");
        let elsewhere =
            render_one("![x](https://tracker.example/p.gif) ![y](https://img.example@tracker.example/p.gif)");
        assert!(!elsewhere.contains("src="), "only the allowed hosts: {elsewhere}");
    }

    #[test]
    fn tables_and_code_render() {
        let html = render_one("| a | b |\n|---|---|\n| 1 | 2 |\n\n```hcl\nmodule \"x\" {}\n```\n");
        assert!(html.contains("<table>") && html.contains("<td>1</td>"), "{html}");
        assert!(html.contains("<code"), "{html}");
    }

    #[test]
    fn a_huge_readme_is_cut_at_a_character_boundary() {
        let html = render_one(&"é".repeat(MAX_README_BYTES));
        assert!(html.contains("The README is cut here."));
    }
}
