//! The page a request brings: documents as the runner moves them (`Doc`), and what is
//! fixed for the whole run about each (`Meta`: canonical URL, host, upper-cased regions).

use crate::contract::{Document, Request};

/// URL canonicalization as the banlist matches it; the lead plugs `crate::url` in here.
pub trait Canon {
    /// (canonical URL, host) of a URL, or why no browser could open it.
    fn canonicalize_with_host(&self, url: &str) -> Result<(String, String), String>;
    /// The registrable domain (eTLD+1) of a host; the host itself for IPs and suffixes.
    fn registrable_domain(&self, host: &str) -> String;
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

/// What the run needs of a document beyond the request, computed once.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    pub canonical: String,
    pub host: String,
    /// Why no browser could open the URL (the banlist rule removes such a document).
    pub url_problem: Option<String>,
    /// The registrable domain of `host`, when a rule of the profile keys on it.
    pub domain: String,
    /// `blocked_regions`, upper-cased as the query's region is.
    pub blocked_regions: Vec<String>,
}

/// The request's documents with their `Meta`, read-only for the whole run.
pub struct Page<'a> {
    pub req: &'a Request,
    pub meta: Vec<Meta>,
}

impl<'a> Page<'a> {
    /// The page of a request and its documents in the ranker's order.
    pub fn build(req: &'a Request, canon: &dyn Canon, need_domain: bool) -> (Page<'a>, Vec<Doc>) {
        let mut meta = Vec::with_capacity(req.documents.len());
        let mut docs = Vec::with_capacity(req.documents.len());
        for (i, d) in req.documents.iter().enumerate() {
            let (canonical, host, url_problem) = match canon.canonicalize_with_host(&d.url) {
                Ok((c, h)) => (c, h, None),
                Err(problem) => (String::new(), String::new(), Some(problem)),
            };
            let domain = if need_domain {
                canon.registrable_domain(&host)
            } else {
                String::new()
            };
            meta.push(Meta {
                canonical,
                host,
                url_problem,
                domain,
                blocked_regions: d.blocked_regions.iter().map(|r| r.to_uppercase()).collect(),
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

    /// The request's document behind `doc`.
    pub fn src(&self, doc: &Doc) -> &'a Document {
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

    /// The `Meta` of `doc`.
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
        fn canonicalize_with_host(&self, url: &str) -> Result<(String, String), String> {
            let rest = url.split_once("//").ok_or("no host")?.1;
            let host = rest.split('/').next().unwrap_or("").to_lowercase();
            Ok((url.to_string(), host))
        }
        fn registrable_domain(&self, host: &str) -> String {
            let labels: Vec<&str> = host.split('.').collect();
            labels[labels.len().saturating_sub(2)..].join(".")
        }
    }

    /// A document with an id, a URL and a score; the rest at its defaults.
    pub fn document(id: &str, url: &str, score: f64) -> Document {
        Document {
            id: id.into(),
            url: url.into(),
            score,
            factors: vec![],
            spam_score: 0.0,
            adult_score: 0.0,
            domain_age_days: None,
            is_ad: false,
            topics: vec![],
            blocked_regions: vec![],
            text: None,
            minhash: None,
            attributes: "{}".into(),
            given: 0,
        }
    }

    /// A request of these documents with a default query.
    pub fn request(documents: Vec<Document>) -> Request {
        Request {
            request_id: None,
            query: Query {
                text: String::new(),
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
    pub fn docs(n: usize) -> Vec<Document> {
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
