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

/// The README as sanitized HTML.
pub fn render(markdown: &str) -> String {
    let mut end = markdown.len().min(MAX_README_BYTES);
    while !markdown.is_char_boundary(end) {
        end -= 1;
    }
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(&markdown[..end], options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut rendered = String::new();
    html::push_html(&mut rendered, events);
    if end < markdown.len() {
        html::push_html(&mut rendered, std::iter::once(Event::Text(CowStr::from("(The README is cut here.)"))));
    }
    sanitizer().clean(&rendered).to_string()
}

fn sanitizer() -> ammonia::Builder<'static> {
    let mut builder = ammonia::Builder::default();
    builder
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .url_relative(UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"))
        .attribute_filter(|element, attribute, value| match (element, attribute) {
            ("img", "src") if !value.starts_with("https://") => None,
            _ => Some(value.into()),
        });
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_in_a_readme_is_text_and_nothing_can_run() {
        let html = render("# Title\n\n<script>alert(1)</script>\n\nText <img src=x onerror=alert(2)> more\n");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
        assert!(html.contains("&lt;img src=x onerror=alert(2)&gt;"), "{html}");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
    }

    #[test]
    fn links_and_images_keep_only_safe_urls() {
        let html = render(
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
    }

    #[test]
    fn tables_and_code_render() {
        let html = render("| a | b |\n|---|---|\n| 1 | 2 |\n\n```hcl\nmodule \"x\" {}\n```\n");
        assert!(html.contains("<table>") && html.contains("<td>1</td>"), "{html}");
        assert!(html.contains("<code"), "{html}");
    }

    #[test]
    fn a_huge_readme_is_cut_at_a_character_boundary() {
        let html = render(&"é".repeat(MAX_README_BYTES));
        assert!(html.contains("The README is cut here."));
    }
}
