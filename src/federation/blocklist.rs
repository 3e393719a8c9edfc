//! The server admin's and channel admins' blocked fediverse domains (`federation/blockdomains`): whether
//! a host or a URL is on the list or under a listed domain. Every part of federation that meets a
//! remote server asks here (the inbox, delivery, the API's follower routes, fediverse sign-in), so no
//! part reaches another to ask.

/// A blocked-domain entry or a host, normalised: trimmed, lower case, no trailing dot.
pub fn normalise_domain(d: &str) -> String {
    d.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `host` (no port) is one of `blocked` or under one (both sides normalised).
pub fn is_blocked_host(blocked: &[String], host: &str) -> bool {
    let host = match url::Url::parse(&format!("http://{}/", host.trim())) {
        Ok(u) => normalise_domain(u.host_str().unwrap_or_default()),
        Err(_) => normalise_domain(host),
    };
    let host = host.as_str();
    !host.is_empty()
        && blocked
            .iter()
            .map(|d| normalise_domain(d))
            .filter(|d| !d.is_empty())
            .any(|d| host == d || host.strip_suffix(d.as_str()).is_some_and(|rest| rest.ends_with('.')))
}

/// Whether the host of `url` is blocked (see [`is_blocked_host`]); a URL without a host is not.
pub fn is_blocked(blocked: &[String], url: &str) -> bool {
    url::Url::parse(url).ok().and_then(|u| u.host_str().map(|h| is_blocked_host(blocked, h))).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_domains_match_subdomains_whatever_the_case_or_trailing_dot() {
        let b = vec!["bad.example".to_string(), "Worse.Example.".to_string()];
        assert!(is_blocked(&b, "https://bad.example/users/x"));
        assert!(is_blocked(&b, "https://a.bad.example/users/x"));
        assert!(is_blocked(&b, "https://BAD.example./users/x"));
        assert!(is_blocked(&b, "https://worse.example:8443/users/x"));
        assert!(!is_blocked(&b, "https://notbad.example/users/x"));
        assert!(!is_blocked(&b, "garbage"));
        assert!(is_blocked_host(&b, "bad.example."));
        assert!(is_blocked_host(&b, "sub.worse.example:443"));
        assert!(!is_blocked_host(&b, "example"));
        let ip = vec!["127.0.0.1.".to_string()];
        assert!(is_blocked(&ip, "http://127.0.0.1:8080/users/x"));
        assert!(is_blocked_host(&ip, "127.0.0.1:8080"));
    }
}
