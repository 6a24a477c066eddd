//! The page a request brings: documents as the runner moves them (`Doc`), and what is
//! fixed for the whole run about each (`Meta`: canonical URL, host, upper-cased regions).

use std::borrow::Cow;

use crate::contract::{Document, Request};
pub use crate::url::Canonical;

/// URL canonicalization as the banlist matches it; the lead plugs `crate::url` in here.
pub trait Canon {
    /// The canonical URL and its host, or why no browser could open it.
    fn canonical_parts<'u>(&self, url: &'u str) -> Result<Canonical<'u>, String>;
    /// The registrable domain (eTLD+1) of a host, a suffix of it; the host itself for IPs
    /// and suffixes.
    fn registrable_domain<'h>(&self, host: &'h str) -> &'h str;
}

/// An entry that matched: what an audit reason says about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// As the store spells it (the audit reason shows it as `[entry <id>]`).
    pub id: String,
    pub scope: String,
    pub value: String,
    pub reason: String,
}

/// A matching index (the banlist, the spam quarantine) as the rules see it.
pub trait Lookup {
    /// The most specific active entry for a canonical URL on `host` (url, prefix, host,
    /// domain), for the request's region at `now` (epoch seconds).
    fn lookup(&self, canonical: &str, host: &str, region: Option<&str>, now: f64) -> Option<Hit>;
    /// `lookup` of each `(canonical URL, host)` of a page, in order (an index may overlap
    /// the reads of a page's URLs).
    fn lookup_page(
        &self,
        urls: &[(&str, &str)],
        region: Option<&str>,
        now: f64,
    ) -> Vec<Option<Hit>> {
        urls.iter()
            .map(|&(canonical, host)| self.lookup(canonical, host, region, now))
            .collect()
    }
    /// Entries held; an empty index is not consulted.
    fn len(&self) -> usize;
    /// True when no entry is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A document folded under another (`collapsed` of the response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Folded {
    /// Index of the folded document in the request.
    pub at: u32,
    /// The rule that folded it.
    pub rule: &'static str,
}

/// One result as the runner moves it: cheap to copy, the rest is in the request and `Meta`.
#[derive(Clone, Debug, PartialEq)]
pub struct Doc {
    /// Index in the request's documents (original_position - 1).
    pub at: u32,
    pub score: f64,
    pub annotations: Vec<&'static str>,
    pub collapsed: Vec<Folded>,
}

impl Doc {
    /// A document left in a slot whose document was moved out (allocates nothing).
    pub(crate) fn placeholder() -> Self {
        Doc {
            at: 0,
            score: 0.0,
            annotations: Vec::new(),
            collapsed: Vec::new(),
        }
    }
}

/// What the run needs of a document beyond the request, computed once. The host and
/// the domain are ranges of the canonical URL, and that is the document's own `url` when
/// it is already canonical (most are): no copies of a page's URLs.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    /// The canonical URL when it is not the document's `url` as given.
    rewritten: Option<String>,
    /// `host.0..host.1` of the canonical URL; the domain is `domain..host.1`.
    host: (u32, u32),
    domain: u32,
    /// Why no browser could open the URL (the banlist rule removes such a document).
    pub url_problem: Option<String>,
    /// `blocked_regions`, upper-cased as the query's region is.
    pub blocked_regions: Vec<String>,
}

/// The request's documents with their `Meta`, read-only for the whole run.
pub struct Page<'a> {
    pub req: &'a Request<'a>,
    pub meta: Vec<Meta>,
}

impl<'a> Page<'a> {
    /// The page of a request and its documents in the ranker's order. The registrable
    /// domain is found only if `need_domain` (a rule of the profile keys on it); else
    /// `domain` is the host.
    pub fn build(
        req: &'a Request<'a>,
        canon: &dyn Canon,
        need_domain: bool,
    ) -> (Page<'a>, Vec<Doc>) {
        let mut meta = Vec::with_capacity(req.documents.len());
        let mut docs = Vec::with_capacity(req.documents.len());
        for (i, d) in req.documents.iter().enumerate() {
            let (rewritten, host, domain, url_problem) = match canon.canonical_parts(&d.url) {
                Ok(found) => {
                    let host = &found.url[found.host.clone()];
                    let domain = if need_domain {
                        host.len() - canon.registrable_domain(host).len()
                    } else {
                        0
                    };
                    let span = (found.host.start as u32, found.host.end as u32);
                    let rewritten = match found.url {
                        Cow::Borrowed(_) => None,
                        Cow::Owned(url) => Some(url),
                    };
                    (rewritten, span, span.0 + domain as u32, None)
                }
                Err(problem) => (Some(String::new()), (0, 0), 0, Some(problem)),
            };
            meta.push(Meta {
                rewritten,
                host,
                domain,
                url_problem,
                blocked_regions: d
                    .blocked_regions
                    .iter()
                    .map(|r| r.to_ascii_uppercase())
                    .collect(),
            });
            docs.push(Doc {
                at: i as u32,
                score: d.score,
                annotations: Vec::new(),
                collapsed: Vec::new(),
            });
        }
        (Page { req, meta }, docs)
    }

    /// The canonical URL of `doc` ("" if no browser could open it).
    pub fn canonical(&self, doc: &Doc) -> &str {
        self.canonical_at(doc.at)
    }

    /// The canonical URL of a request document by index.
    pub fn canonical_at(&self, at: u32) -> &str {
        match &self.meta[at as usize].rewritten {
            Some(url) => url,
            None => &self.req.documents[at as usize].url,
        }
    }

    /// The host of `doc`'s canonical URL ("" if no browser could open it).
    pub fn host(&self, doc: &Doc) -> &str {
        self.host_at(doc.at)
    }

    /// The host of a request document's canonical URL by index.
    pub fn host_at(&self, at: u32) -> &str {
        let (start, end) = self.meta[at as usize].host;
        &self.canonical_at(at)[start as usize..end as usize]
    }

    /// The registrable domain of `doc`'s host (its host if the page was built without
    /// domains).
    pub fn domain(&self, doc: &Doc) -> &str {
        let m = &self.meta[doc.at as usize];
        &self.canonical(doc)[m.domain as usize..m.host.1 as usize]
    }

    /// The request's document behind `doc`.
    pub fn src(&self, doc: &Doc) -> &'a Document<'a> {
        &self.req.documents[doc.at as usize]
    }

    /// The id of `doc`, borrowed from the request.
    pub fn id(&self, doc: &Doc) -> &'a str {
        &self.req.documents[doc.at as usize].id
    }

    /// The id of a request document by index.
    pub fn id_at(&self, at: u32) -> &'a str {
        &self.req.documents[at as usize].id
    }

    /// The `Meta` of `doc`: why its URL cannot be opened, its blocked regions.
    pub fn meta(&self, doc: &Doc) -> &Meta {
        &self.meta[doc.at as usize]
    }
}

#[cfg(test)]
pub mod testing {
    //! Plain pages for the rules' and the runner's unit tests.
    use super::*;
    use crate::contract::{AgeMode, Query};

    /// Host = the text between `//` and the next `/`; domain = its last two labels;
    /// a URL without `//` cannot be opened.
    pub struct SimpleCanon;

    impl Canon for SimpleCanon {
        fn canonical_parts<'u>(&self, url: &'u str) -> Result<Canonical<'u>, String> {
            let at = url.find("//").ok_or("no host")? + 2;
            let end = url[at..].find('/').map_or(url.len(), |i| at + i);
            let host = &url[at..end];
            let url = if host.bytes().any(|b| b.is_ascii_uppercase()) {
                Cow::Owned(format!(
                    "{}{}{}",
                    &url[..at],
                    host.to_lowercase(),
                    &url[end..]
                ))
            } else {
                Cow::Borrowed(url)
            };
            Ok(Canonical { url, host: at..end })
        }
        fn registrable_domain<'h>(&self, host: &'h str) -> &'h str {
            match host.rmatch_indices('.').nth(1) {
                Some((dot, _)) => &host[dot + 1..],
                None => host,
            }
        }
    }

    /// A document with an id, a URL and a score; the rest at its defaults.
    pub fn document(id: &str, url: &str, score: f64) -> Document<'static> {
        Document {
            id: id.to_string().into(),
            url: url.to_string().into(),
            score,
            factors: Default::default(),
            spam_score: 0.0,
            adult_score: 0.0,
            domain_age_days: None,
            is_ad: false,
            topics: Default::default(),
            blocked_regions: Default::default(),
            text: None,
            minhash: None,
            attributes: "{}".into(),
            given: 0,
        }
    }

    /// A request of these documents with a default query.
    pub fn request(documents: Vec<Document<'static>>) -> Request<'static> {
        Request {
            request_id: None,
            query: Query {
                text: "".into(),
                classes: vec![],
                region: None,
                age_mode: AgeMode::Moderate,
            },
            unit: vec![],
            profile: None,
            depth: None,
            documents,
        }
    }

    /// `n` documents d1..dn on hosts h1..hn with scores n..1.
    pub fn docs(n: usize) -> Vec<Document<'static>> {
        (1..=n)
            .map(|i| {
                document(
                    &format!("d{i}"),
                    &format!("http://h{i}.example/"),
                    (n + 1 - i) as f64,
                )
            })
            .collect()
    }
}
