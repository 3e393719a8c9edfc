//! The chat slur filter (`chat/slurfilterenabled`): masks listed words in users' chat messages with
//! `*` before they are stored, broadcast or sent to webhooks.
//!
//! The list is [`DEFAULT_WORDS`] (slurs and strong profanity) plus the owner's words from
//! `config/chat/slurfilterwords`. Matching is per whole word, case-insensitive, so a listed word
//! inside a longer harmless one ("class", "Scunthorpe") is left alone; a listed word followed by a
//! common English ending (`s`, `es`, `ed`, `er`, `ers`, `ing`, `y`) is masked too. In the rendered
//! HTML only the text is masked (tag names, attributes and character entities are left as they are),
//! so the markup stays valid.
//!
//! A filter is built once per word list ([`WordFilter::for_words`] keeps the last [`CACHED_LISTS`]
//! lists' filters, one per channel in practice), not for every message.

use std::collections::HashSet;

/// The built-in list (lowercase).
pub const DEFAULT_WORDS: &[&str] = &[
    // slurs
    "nigger",
    "nigga",
    "faggot",
    "fag",
    "dyke",
    "tranny",
    "retard",
    "kike",
    "spic",
    "chink",
    "gook",
    "wetback",
    "coon",
    "raghead",
    "towelhead",
    // strong profanity
    "fuck",
    "motherfucker",
    "shit",
    "bullshit",
    "cunt",
    "bitch",
    "asshole",
    "twat",
    "wanker",
    "whore",
    "slut",
];

/// Endings after a listed word that still count as the word.
const SUFFIXES: &[&str] = &["s", "es", "ed", "er", "ers", "ing", "y"];

/// A word list ready to mask text.
pub struct WordFilter {
    words: HashSet<String>,
}

/// How many word lists' filters [`WordFilter::for_words`] keeps (the oldest goes first).
pub const CACHED_LISTS: usize = 64;

type Cached = Vec<(Vec<String>, std::sync::Arc<WordFilter>)>;

impl WordFilter {
    /// The filter of the built-in list plus `extra`, built once per list (see the module doc).
    pub fn for_words(extra: &[String]) -> std::sync::Arc<WordFilter> {
        static CACHE: parking_lot::Mutex<Cached> = parking_lot::Mutex::new(Vec::new());
        let mut cache = CACHE.lock();
        if let Some(pos) = cache.iter().position(|(words, _)| words.as_slice() == extra) {
            let hit = cache.remove(pos);
            let filter = hit.1.clone();
            cache.push(hit);
            return filter;
        }
        let filter = std::sync::Arc::new(WordFilter::new(extra));
        if cache.len() >= CACHED_LISTS {
            cache.remove(0);
        }
        cache.push((extra.to_vec(), filter.clone()));
        filter
    }

    /// The built-in list plus `extra` (any case).
    pub fn new(extra: &[String]) -> Self {
        let mut words: HashSet<String> = DEFAULT_WORDS.iter().map(|w| w.to_string()).collect();
        words.extend(extra.iter().map(|w| w.trim().to_lowercase()).filter(|w| !w.is_empty()));
        Self { words }
    }

    fn matches(&self, word: &str) -> bool {
        let lower = word.to_lowercase();
        if self.words.contains(&lower) {
            return true;
        }
        SUFFIXES.iter().any(|suffix| lower.strip_suffix(suffix).is_some_and(|stem| self.words.contains(stem)))
    }

    /// Mask the listed words of plain text.
    pub fn mask_text(&self, text: &str) -> String {
        self.mask_words(text, false)
    }

    /// Mask the listed words in the text of rendered HTML (never inside tags or entities).
    pub fn mask_html(&self, html: &str) -> String {
        let mut out = String::with_capacity(html.len());
        let mut rest = html;
        while let Some(open) = rest.find('<') {
            out.push_str(&self.mask_words(&rest[..open], true));
            let close = rest[open..].find('>').map_or(rest.len(), |i| open + i + 1);
            out.push_str(&rest[open..close]);
            rest = &rest[close..];
        }
        out.push_str(&self.mask_words(rest, true));
        out
    }

    /// Replace every listed word by as many `*`; with `entities`, `&name;` references are kept.
    fn mask_words(&self, text: &str, entities: bool) -> String {
        let mut out = String::with_capacity(text.len());
        let mut word = String::new();
        let mut after_amp = false;
        let flush = |word: &mut String, out: &mut String, keep: bool| {
            if !keep && self.matches(word) {
                out.extend(std::iter::repeat_n('*', word.chars().count()));
            } else {
                out.push_str(word);
            }
            word.clear();
        };
        for c in text.chars() {
            if c.is_alphanumeric() {
                word.push(c);
                continue;
            }
            flush(&mut word, &mut out, entities && after_amp);
            after_amp = c == '&';
            out.push(c);
        }
        flush(&mut word, &mut out, entities && after_amp);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_are_masked_in_any_case_with_endings() {
        let f = WordFilter::new(&[]);
        assert_eq!(f.mask_text("what the Fuck, SHIT happens"), "what the ****, **** happens");
        assert_eq!(f.mask_text("fucking bitches"), "******* *******");
        assert_eq!(f.mask_text("classic Scunthorpe shitake? no: shiitake"), "classic Scunthorpe shitake? no: shiitake");
    }

    #[test]
    fn owner_words_are_added() {
        let f = WordFilter::new(&["Darn".into(), " ".into()]);
        assert_eq!(f.mask_text("darn it"), "**** it");
    }

    #[test]
    fn html_keeps_its_markup() {
        let f = WordFilter::new(&["amp".into(), "strong".into(), "href".into()]);
        let html = r#"<p><strong>strong</strong> &amp; amp <a href="https://x.example/strong">link</a></p>"#;
        assert_eq!(
            f.mask_html(html),
            r#"<p><strong>******</strong> &amp; *** <a href="https://x.example/strong">link</a></p>"#
        );
    }

    #[test]
    fn a_word_lists_filter_is_built_once() {
        let list = vec!["zorblaxonce".to_string()];
        let a = WordFilter::for_words(&list);
        let b = WordFilter::for_words(&list);
        assert!(std::sync::Arc::ptr_eq(&a, &b), "the same list: the same filter");
        assert_eq!(a.mask_text("a zorblaxonce b"), "a *********** b");
        let other = WordFilter::for_words(&["quimbletwo".to_string()]);
        assert!(!std::sync::Arc::ptr_eq(&a, &other));
        assert_eq!(other.mask_text("zorblaxonce"), "zorblaxonce", "each list its own words");
    }
}
