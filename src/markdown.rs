//! Markdown rendering of owner-written text (offline message, extra page content).
//!
//! The owner is trusted (they can already add custom JavaScript), so inline HTML is kept; chat
//! messages from viewers go through the chat module's sanitizer instead.

use pulldown_cmark::{html, Options, Parser};

/// Render CommonMark (with tables, strikethrough and task lists) to HTML.
pub fn to_html(src: &str) -> String {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut out = String::with_capacity(src.len() + src.len() / 4);
    html::push_html(&mut out, Parser::new_ext(src, opts));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders() {
        assert_eq!(super::to_html("**hi**").trim(), "<p><strong>hi</strong></p>");
        assert_eq!(super::to_html(""), "");
    }
}
