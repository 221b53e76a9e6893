//! What the test S3 server answered, counted by kind of request, and what its listings
//! returned, so that a test or a benchmark can tell what a client cost the store.

use std::collections::BTreeMap;

/// Requests answered (any status), by kind, since the server started or since the counts were
/// last taken ([`crate::S3Server::take_requests`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// ListObjects (a GET on the bucket).
    pub list: u64,
    /// GET of an object.
    pub get: u64,
    /// PUT of an object (copies included).
    pub put: u64,
    pub head: u64,
    pub delete: u64,
    /// POST (multi-object deletes, multipart uploads).
    pub post: u64,
    pub other: u64,
    /// What the listings returned, by the first segment of the listed prefix (`landing` for
    /// `landing/2026/…`; `""` for a listing of the whole bucket).
    pub listed: BTreeMap<String, Listed>,
}

/// The listings of one prefix: how many, and the keys and body bytes they returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Listed {
    pub requests: u64,
    /// Objects returned (each `<Key>` of the responses).
    pub keys: u64,
    /// Bytes of the response bodies.
    pub bytes: u64,
    /// The most keys one response returned.
    pub max_keys: u64,
}

impl RequestCounts {
    /// Every request, whatever its kind.
    pub fn total(&self) -> u64 {
        self.list + self.get + self.put + self.head + self.delete + self.post + self.other
    }

    /// Adds a request of `kind` whose response body (when the server had it whole) was `body`.
    pub(crate) fn count(&mut self, kind: &Kind, body: Option<&[u8]>) {
        match kind {
            Kind::List { prefix_root } => {
                self.list += 1;
                let l = self.listed.entry(prefix_root.clone()).or_default();
                let keys = body.map_or(0, |b| occurrences(b, b"<Key>"));
                l.requests += 1;
                l.keys += keys;
                l.bytes += body.map_or(0, |b| b.len() as u64);
                l.max_keys = l.max_keys.max(keys);
            }
            Kind::Get => self.get += 1,
            Kind::Put => self.put += 1,
            Kind::Head => self.head += 1,
            Kind::Delete => self.delete += 1,
            Kind::Post => self.post += 1,
            Kind::Other => self.other += 1,
        }
    }
}

/// The kind of one request, from its method and URI (path-style: `/bucket/key?query`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    List { prefix_root: String },
    Get,
    Put,
    Head,
    Delete,
    Post,
    Other,
}

impl Kind {
    pub(crate) fn of(method: &http::Method, uri: &http::Uri) -> Kind {
        let query = uri.query().unwrap_or("");
        let on_bucket = uri.path().trim_matches('/').split_once('/').is_none();
        match *method {
            http::Method::GET if on_bucket || query.contains("list-type=") => Kind::List {
                prefix_root: prefix_root(query),
            },
            http::Method::GET => Kind::Get,
            http::Method::PUT => Kind::Put,
            http::Method::HEAD => Kind::Head,
            http::Method::DELETE => Kind::Delete,
            http::Method::POST => Kind::Post,
            _ => Kind::Other,
        }
    }
}

/// The first segment of the `prefix` parameter of a listing's query.
fn prefix_root(query: &str) -> String {
    let prefix = query
        .split('&')
        .find_map(|p| p.strip_prefix("prefix="))
        .unwrap_or("");
    let decoded = prefix.replace("%2F", "/").replace("%2f", "/");
    let root = decoded.trim_start_matches('/');
    root.split('/').next().unwrap_or("").to_string()
}

fn occurrences(haystack: &[u8], needle: &[u8]) -> u64 {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: http::Method, uri: &str) -> Kind {
        Kind::of(&method, &uri.parse().unwrap())
    }

    #[test]
    fn kinds_from_method_and_path() {
        let list = kind(
            http::Method::GET,
            "/ravel-test?list-type=2&prefix=landing%2F2026%2F&start-after=x",
        );
        assert_eq!(
            list,
            Kind::List {
                prefix_root: "landing".into()
            }
        );
        assert_eq!(kind(http::Method::GET, "/ravel-test/a/b"), Kind::Get);
        assert_eq!(kind(http::Method::HEAD, "/ravel-test/a"), Kind::Head);
        assert_eq!(kind(http::Method::PUT, "/ravel-test/a"), Kind::Put);
        let whole = kind(http::Method::GET, "/ravel-test/");
        assert_eq!(
            whole,
            Kind::List {
                prefix_root: String::new()
            }
        );
    }

    #[test]
    fn listings_count_their_keys() {
        let mut c = RequestCounts::default();
        let body = b"<ListBucketResult><Contents><Key>a</Key></Contents><Contents><Key>b</Key></Contents></ListBucketResult>";
        let list = Kind::List {
            prefix_root: "landing".into(),
        };
        c.count(&list, Some(body));
        c.count(&Kind::Get, None);
        assert_eq!(c.total(), 2);
        let l = c.listed["landing"];
        assert_eq!((l.requests, l.keys, l.max_keys), (1, 2, 2));
        assert_eq!(l.bytes, body.len() as u64);
    }
}
