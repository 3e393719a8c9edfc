//! Chat message rendering: markdown → HTML (pulldown-cmark, with bare http/https links turned into
//! links as goldmark's linkify does), then ammonia with exactly Owncast's allow-list:
//!
//! * `a[href]`: http, https and mailto URLs that parse, kept in the URL parser's normalised form;
//!   `rel="noopener noreferrer"` is forced and `target="_blank"` added (every allowed link is absolute);
//! * `br`, `p`, `strong`, `em`, `code`, `pre`;
//! * `img` only for custom emoji: `src` under `/img/emoji/` once percent-decoded and path-normalised
//!   (and stored in that form, so `/img/emoji/%2e%2e/...` cannot point a browser at another route),
//!   `alt`/`title` of the form `:name:`, `class` starting with `emoji`; any other image is removed
//!   entirely.
//!
//! Everything else is stripped (the text of unknown tags is kept; `script` and `style` lose their
//! content too).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use pulldown_cmark::{html, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

fn cleaner() -> &'static ammonia::Builder<'static> {
    static CLEANER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    CLEANER.get_or_init(|| {
        let tags: HashSet<&str> = ["a", "br", "p", "strong", "em", "code", "pre", "img"].into_iter().collect();
        let mut attrs: HashMap<&str, HashSet<&str>> = HashMap::new();
        attrs.insert("a", ["href"].into_iter().collect());
        attrs.insert("img", ["src", "alt", "title", "class"].into_iter().collect());
        let mut b = ammonia::Builder::default();
        b.tags(tags)
            .tag_attributes(attrs)
            .generic_attributes(HashSet::new())
            .url_schemes(["http", "https", "mailto"].into_iter().collect())
            .url_relative(ammonia::UrlRelative::PassThrough)
            .link_rel(Some("noopener noreferrer"))
            .set_tag_attribute_value("a", "target", "_blank")
            .attribute_filter(filter_attribute);
        b
    })
}

fn is_emoji_name(v: &str) -> bool {
    v.len() > 2
        && v.starts_with(':')
        && v.ends_with(':')
        && v[1..v.len() - 1].chars().all(|c| c.is_ascii_alphanumeric() || "_+-".contains(c))
}

/// `path` without a channel's prefix (`/c/{slug}`), if it has one: a channel's custom emoji are at
/// `/c/{slug}/img/emoji/...`.
fn channel_prefixed(path: &str) -> &str {
    let Some(rest) = path.strip_prefix("/c/") else { return path };
    match rest.split_once('/') {
        Some((slug, _))
            if (1..=32).contains(&slug.len())
                && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') =>
        {
            &rest[slug.len()..]
        }
        _ => path,
    }
}

/// A link's `href` as stored: an http, https or mailto URL that parses, in the URL parser's form (dot
/// segments, backslashes and encoded dots resolved as a browser resolves them) unless that form means
/// the same as what was written (only a trailing `/` added).
fn link_href(value: &str) -> Option<Cow<'_, str>> {
    let u = url::Url::parse(value).ok().filter(|u| matches!(u.scheme(), "http" | "https" | "mailto"))?;
    let normal = u.as_str();
    if normal == value || normal.strip_suffix('/') == Some(value) {
        Some(Cow::Borrowed(value))
    } else {
        Some(Cow::Owned(normal.to_string()))
    }
}

/// A custom emoji's `src` as stored: the path normalised (`http::urls::normalize_path`: every
/// encoding decoded, backslashes, repeated slashes and `.`/`..` resolved) must be under
/// `/img/emoji/` (or a channel's `/c/{slug}/img/emoji/`) with only letters, digits and `_-. +()`,
/// and that normalised form, re-encoded, is what is kept: what was checked is what a browser asks for.
fn emoji_src(value: &str) -> Option<Cow<'_, str>> {
    let path = crate::http::urls::normalize_path(value)?;
    let emoji = channel_prefixed(&path).strip_prefix("/img/emoji/").unwrap_or_default();
    let ok = !emoji.is_empty()
        && !emoji.ends_with('/')
        && path.chars().all(|c| c.is_ascii_alphanumeric() || "/_-. +()".contains(c));
    if !ok {
        return None;
    }
    let encoded = crate::http::urls::encode_path(&path);
    Some(if encoded == value { Cow::Borrowed(value) } else { Cow::Owned(encoded) })
}

fn filter_attribute<'u>(element: &str, attribute: &str, value: &'u str) -> Option<Cow<'u, str>> {
    let ok = match (element, attribute) {
        ("a", "href") => return link_href(value),
        ("img", "src") => return emoji_src(value),
        ("img", "alt") | ("img", "title") => is_emoji_name(value),
        ("img", "class") => {
            value.starts_with("emoji") && value.chars().all(|c| c.is_ascii_alphanumeric() || "_- ".contains(c))
        }
        _ => true,
    };
    ok.then_some(Cow::Borrowed(value))
}

/// Turn bare http(s) URLs in a text run into link events.
fn linkify<'a>(text: CowStr<'a>, out: &mut Vec<Event<'a>>) {
    let s: &str = &text;
    if !s.contains("http://") && !s.contains("https://") {
        out.push(Event::Text(text));
        return;
    }
    let mut rest = s;
    let mut pending = String::new();
    while !rest.is_empty() {
        let start = ["https://", "http://"].iter().filter_map(|p| rest.find(p)).min();
        let Some(start) = start else { break };
        let boundary_ok = start == 0 || rest[..start].ends_with(|c: char| c.is_whitespace() || c == '(');
        let tail = &rest[start..];
        let end = tail.find(char::is_whitespace).unwrap_or(tail.len());
        let url_text = tail[..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '\'', '"']);
        if !boundary_ok || url::Url::parse(url_text).is_err() || url_text.len() <= "https://".len() {
            let skip = start + "http".len();
            pending.push_str(&rest[..skip]);
            rest = &rest[skip..];
            continue;
        }
        pending.push_str(&rest[..start]);
        if !pending.is_empty() {
            out.push(Event::Text(CowStr::from(std::mem::take(&mut pending))));
        }
        let url = url_text.to_string();
        out.push(Event::Start(Tag::Link {
            link_type: LinkType::Autolink,
            dest_url: CowStr::from(url.clone()),
            title: CowStr::from(""),
            id: CowStr::from(""),
        }));
        out.push(Event::Text(CowStr::from(url)));
        out.push(Event::End(TagEnd::Link));
        rest = &rest[start + url_text.len()..];
    }
    pending.push_str(rest);
    if !pending.is_empty() {
        out.push(Event::Text(CowStr::from(pending)));
    }
}

/// Remove `<img ...>` tags that lost their `src` to the filter (a non-emoji image).
fn drop_bare_images(html: String) -> String {
    if !html.contains("<img") {
        return html;
    }
    let mut out = String::with_capacity(html.len());
    let mut rest = html.as_str();
    while let Some(i) = rest.find("<img") {
        out.push_str(&rest[..i]);
        let tag_end = rest[i..].find('>').map(|e| i + e + 1).unwrap_or(rest.len());
        let tag = &rest[i..tag_end];
        if tag.contains(" src=\"") {
            out.push_str(tag);
        }
        rest = &rest[tag_end..];
    }
    out.push_str(rest);
    out
}

/// Render a chat message body to safe HTML. Newlines become spaces first, as Owncast does.
pub fn render(body: &str) -> String {
    let body = body.replace(['\r', '\n'], " ");
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let mut events = Vec::new();
    let mut link_depth = 0usize;
    let mut code_depth = 0usize;
    for ev in Parser::new_ext(body, Options::empty()) {
        match ev {
            Event::Start(Tag::Link { .. }) => {
                link_depth += 1;
                events.push(ev);
            }
            Event::End(TagEnd::Link) => {
                link_depth = link_depth.saturating_sub(1);
                events.push(ev);
            }
            Event::Start(Tag::CodeBlock(_)) => {
                code_depth += 1;
                events.push(ev);
            }
            Event::End(TagEnd::CodeBlock) => {
                code_depth = code_depth.saturating_sub(1);
                events.push(ev);
            }
            Event::Text(t) if link_depth == 0 && code_depth == 0 => linkify(t, &mut events),
            other => events.push(other),
        }
    }
    let mut raw = String::with_capacity(body.len() * 2);
    html::push_html(&mut raw, events.into_iter());
    let clean = cleaner().clean(&raw).to_string();
    drop_bare_images(clean).trim().to_string()
}

/// Clean HTML that is already rendered (a message body from elsewhere, such as an Owncast import)
/// with the same allow-list as [`render`]'s output: no Markdown, only the cleaning.
pub fn clean_html(html: &str) -> String {
    drop_bare_images(cleaner().clean(html).to_string()).trim().to_string()
}

/// Whether rendered HTML carries no visible content (nothing to send).
pub fn is_empty(html: &str) -> bool {
    if html.contains("<img") {
        return false;
    }
    let mut in_tag = false;
    let mut text = String::new();
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.replace("&nbsp;", " ").trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_html_from_elsewhere_is_cleaned_alike() {
        let out = clean_html(
            r#"<p>hi <script>alert(1)</script><a href="javascript:alert(2)">x</a> <a href="https://ok.example/">ok</a> <img src="https://evil.example/t.gif"></p>"#,
        );
        assert!(!out.contains("script") && !out.contains("alert") && !out.contains("javascript"), "{out}");
        assert!(!out.contains("<img") && !out.contains("evil"), "{out}");
        assert!(out.contains(r#"href="https://ok.example/""#) && out.contains("rel=\"noopener noreferrer\""), "{out}");
        assert_eq!(clean_html("<p>hello <strong>you</strong></p>"), "<p>hello <strong>you</strong></p>");
    }

    #[test]
    fn plain_text_is_a_paragraph() {
        assert_eq!(render("hi"), "<p>hi</p>");
        assert_eq!(render("  "), "");
    }

    #[test]
    fn markdown_is_rendered() {
        assert_eq!(render("**bold** *it* `c`"), "<p><strong>bold</strong> <em>it</em> <code>c</code></p>");
    }

    #[test]
    fn scripts_and_unknown_tags_are_stripped() {
        let out = render("hello <script>alert(1)</script><b>x</b> <iframe src=x></iframe>");
        assert!(!out.contains("script") && !out.contains("alert") && !out.contains("<b>") && !out.contains("iframe"));
        assert!(out.contains("hello") && out.contains('x'));
        let out = render("<p onclick=\"evil()\">x</p>");
        assert!(!out.contains("onclick"), "{out}");
        assert!(render("# Title").contains("Title") && !render("# Title").contains("<h1>"));
    }

    #[test]
    fn links_get_rel_and_target_and_bad_schemes_go() {
        let out = render("[site](https://example.com)");
        assert!(out.contains("href=\"https://example.com\""), "{out}");
        assert!(out.contains("rel=\"noopener noreferrer\"") && out.contains("target=\"_blank\""), "{out}");
        let out = render("[x](javascript:alert(1))");
        assert!(!out.contains("javascript"), "{out}");
        let out = render("[x](/relative)");
        assert!(!out.contains("href"), "{out}");
    }

    #[test]
    fn bare_urls_are_linked() {
        let out = render("see https://example.com/page. ok");
        assert!(out.contains("<a href=\"https://example.com/page\""), "{out}");
        assert!(out.contains("page</a>. ok"), "{out}");
        assert!(!render("ftp://example.com").contains("<a"));
    }

    #[test]
    fn only_emoji_images_survive() {
        let ok = render("<img src=\"/img/emoji/party.gif\" alt=\":party:\" title=\":party:\" class=\"emoji\">");
        assert!(ok.contains("src=\"/img/emoji/party.gif\""), "{ok}");
        assert!(ok.contains("class=\"emoji\""), "{ok}");
        let bad = render("x <img src=\"https://evil.example/track.png\" onerror=\"alert(1)\">");
        assert!(!bad.contains("<img") && !bad.contains("onerror"), "{bad}");
        let bad = render("![a](https://evil.example/a.png)");
        assert!(!bad.contains("<img"), "{bad}");
        let ok = render("<img src=\"/c/music/img/emoji/party.gif\" alt=\":party:\" class=\"emoji\">");
        assert!(ok.contains("src=\"/c/music/img/emoji/party.gif\""), "{ok}");
        for bad in ["/c/Music/img/emoji/a.gif", "/c/a/b/img/emoji/a.gif", "/c//img/emoji/a.gif", "/c/music/img/x/a.gif"]
        {
            let out = render(&format!("<img src=\"{bad}\" alt=\":x:\">"));
            assert!(!out.contains(bad), "{out}");
        }
        let bad = render("<img src=\"/img/emoji/../../etc/passwd\" alt=\":x:\">");
        assert!(!bad.contains("<img"), "{bad}");
    }

    #[test]
    fn emoji_paths_are_normalised_before_they_are_checked() {
        for raw in [
            "/img/emoji/%2e%2e/%2e%2e/api/admin/disconnect",
            "/img/emoji/%2E%2e/%2e%2E/api/admin/disconnect",
            "/img/emoji/%252e%252e/%252e%252e/api/admin/disconnect",
            "/img/emoji/%25252e%25252e/%25252e%25252e/api/admin/disconnect",
            "/img/emoji/..%2f..%2fapi%2fadmin%2fdisconnect",
            "/img/emoji/..\\..\\api\\admin\\disconnect",
            "/img/emoji/%5c..%5c..%5capi/admin/disconnect",
            "/img/emoji//..//..//api/admin/disconnect",
            "/c/music/img/emoji/%2e%2e/%2e%2e/%2e%2e/%2e%2e/api/admin/disconnect",
            "/img/emoji/%252525252e",
        ] {
            let out = render(&format!("<img src=\"{raw}\" alt=\":x:\" class=\"emoji\">"));
            assert!(!out.contains("<img") && !out.contains("admin"), "{raw}: {out}");
            let out = clean_html(&format!("<p><img src=\"{raw}\" alt=\":x:\"></p>"));
            assert!(!out.contains("<img") && !out.contains("admin"), "{raw}: {out}");
        }
        // What stays is stored as a browser would request it.
        let out = render("<img src=\"/img/emoji/./blob/%61.gif\" alt=\":a:\">");
        assert!(out.contains("src=\"/img/emoji/blob/a.gif\""), "{out}");
        let out = render("<img src=\"/img//emoji/a%20b.gif\" alt=\":a:\">");
        assert!(out.contains("src=\"/img/emoji/a%20b.gif\""), "{out}");
    }

    #[test]
    fn links_are_stored_normalised() {
        let out = render("[x](https://host.example/img/emoji/%2e%2e/%2e%2e/api/admin/disconnect)");
        assert!(out.contains("href=\"https://host.example/api/admin/disconnect\""), "{out}");
        let out = clean_html("<a href=\"https://host.example/a/..\\..\\b\">x</a>");
        assert!(out.contains("href=\"https://host.example/b\""), "{out}");
        assert!(render("[x](https://example.com)").contains("href=\"https://example.com\""));
    }

    #[test]
    fn emptiness() {
        assert!(is_empty(&render("<script>x</script>")));
        assert!(!is_empty(&render("a")));
    }
}
